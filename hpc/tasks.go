// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import (
	"strconv"
	"strings"
)

// maxNodes bounds the node count ParseTasksPerNode expands to, so a
// malformed variable cannot make it allocate without limit.
const maxNodes = 1 << 20

// ParseTasksPerNode expands Slurm's compact tasks-per-node list, as in
// SLURM_TASKS_PER_NODE, to one count per node: "2(x3),1" is [2 2 2 1].
// It returns nil for an empty or malformed list, or one of more than
// 1<<20 nodes.
func ParseTasksPerNode(s string) []int {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err := strconv.Atoi(count)
		if err != nil || c < 0 {
			return nil
		}
		r, err := strconv.Atoi(rep)
		if err != nil || r < 1 || r > maxNodes-len(out) {
			return nil
		}
		for range r {
			out = append(out, c)
		}
	}
	return out
}
