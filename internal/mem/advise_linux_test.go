// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vmaFlags returns the VmFlags line of the mapping of /proc/self/smaps
// that contains address p.
func vmaFlags(t *testing.T, p uintptr) string { return smapsLine(t, p, "VmFlags:") }

// smapsLine returns the line starting with prefix of the mapping of
// /proc/self/smaps that contains address p.
func smapsLine(t *testing.T, p uintptr, prefix string) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 && strings.Contains(line[:strings.IndexByte(line, ' ')], "-") {
			in = lo <= p && p < hi
			continue
		}
		if in && strings.HasPrefix(line, prefix) {
			return line
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping of /proc/self/smaps holds %#x with a %s line", p, prefix)
	return ""
}

func TestHugeMarksWindows(t *testing.T) {
	if !hugeOn {
		t.Skip("TDMPI_HUGEPAGES=0: Huge advises nothing")
	}
	for _, size := range []int{int(aroundMin), 1 << 20, 3 * HugeMin} {
		for _, alloc := range []func(int) []byte{Alloc, AllocUninit} {
			b := Huge(alloc(size))
			// "hg" is the VM_HUGEPAGE flag that MADV_HUGEPAGE sets: on the
			// windows of b's first and last bytes, whole.
			for _, p := range []uintptr{addr(b), addr(b) + uintptr(len(b)-1)} {
				w := p &^ (hugePage - 1)
				for _, q := range []uintptr{w, w + hugePage - 1} {
					require.Contains(t, strings.Fields(vmaFlags(t, q)), "hg", "size %d, address %#x", size, q)
				}
			}
			sink = b
		}
	}
}

func TestNoHugeMarksInterior(t *testing.T) {
	b := NoHuge(Huge(Alloc(3 * HugeMin)))
	off, n := hugeSpan(b)
	require.Positive(t, n)
	// "nh" is the VM_NOHUGEPAGE flag that MADV_NOHUGEPAGE sets.
	flags := strings.Fields(vmaFlags(t, addr(b)+uintptr(off)))
	require.Contains(t, flags, "nh")
	require.NotContains(t, flags, "hg")
	sink = b
}
