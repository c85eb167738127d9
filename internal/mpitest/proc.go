// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

import (
	"os"
	"strconv"
	"strings"
)

// ProcStatus returns the field name of /proc/self/status ("VmRSS",
// "RssAnon", ...) in KiB, or -1 where there is no such file or field (not
// Linux), so that memory tests can skip.
func ProcStatus(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
