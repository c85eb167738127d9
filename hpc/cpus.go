// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OnlineCPUs returns the number of CPUs online on this machine, as Linux
// lists them in /sys/devices/system/cpu/online. Compared with
// runtime.NumCPU, the CPUs this process may run on, it tells whether the
// launcher bound the process to some of them.
func OnlineCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0, err
	}
	n, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("hpc: online CPUs %q: %w", b, err)
	}
	return n, nil
}

// parseCPUList counts the CPUs of a Linux CPU list, such as "0-3,8,10-11".
func parseCPUList(s string) (int, error) {
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, err
			}
		}
		if a < 0 || b < a {
			return 0, fmt.Errorf("range %q", part)
		}
		n += b - a + 1
	}
	return n, nil
}

// AffinityMask returns the CPUs this process may run on, its affinity mask
// (sched_getaffinity): CPU i is bit i%64 of word i/64. It holds
// runtime.NumCPU CPUs, unless the mask changed since the process started.
func AffinityMask() ([]uint64, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("hpc: affinity mask: %w", err)
	}
	words := make([]uint64, len(set))
	for i, w := range set {
		words[i] = uint64(w)
	}
	return words, nil
}
