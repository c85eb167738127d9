// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
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

// Huge gives a new buffer huge pages where it reuses heap memory that was
// faulted in as 4 KiB pages, and NoHuge gives one 4 KiB pages where it
// reuses huge pages: advice alone leaves present pages as they are. The
// test calls each on a buffer it faulted in itself the other way, since
// whether the heap's next object takes the place of one just freed is up
// to the runtime.
func TestHugeNoHugeReuse(t *testing.T) {
	needHugePages(t)
	const n = 64 << 20
	write := func(b []byte, v byte) []byte {
		for i := 0; i < len(b); i += 4096 {
			b[i] = v
		}
		return b
	}
	huge := func(b []byte) (kb int64, ln int) {
		off, ln := hugeSpan(b)
		return anonHuge(t, addr(b)+uintptr(off), ln), ln
	}

	b := write(NoHuge(AllocUninit(n)), 1)
	kb, ln := huge(b)
	require.Zero(t, kb, "NoHuge on new memory")
	write(Huge(b), 2)
	kb, _ = huge(b)
	t.Logf("Huge over 4 KiB pages present: %d of %d MiB in huge pages", kb>>10, ln>>20)
	if kb<<10 < int64(ln)/2 {
		if ctl := controlHuge(t, n); ctl<<10 < int64(ln)/2 {
			t.Skipf("SKIPPED: the kernel has too few free huge pages now: a fresh advised mapping of %d MiB got %d MiB of them", n>>20, ctl>>10)
		}
		t.Fatalf("Huge left %d of %d MiB of present 4 KiB pages as they were", (int64(ln)-kb<<10)>>20, ln>>20)
	}
	write(NoHuge(b), 3)
	kb, _ = huge(b)
	require.Zero(t, kb, "NoHuge over huge pages present")
	runtime.KeepAlive(b)
}
