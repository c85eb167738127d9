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
	"golang.org/x/sys/unix"
)

// anonHuge returns the AnonHugePages, in kB, of the mappings of
// /proc/self/smaps that overlap the n bytes at p, each counted for at most
// its overlap: the span may cover several mappings (the heap's mapping is
// split where earlier advice ended), and a mapping may reach beyond it.
func anonHuge(t *testing.T, p uintptr, n int) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	var total, overlap int64
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if k, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); k == 2 && strings.Contains(line[:strings.IndexByte(line, ' ')], "-") {
			overlap = int64(min(hi, p+uintptr(n))) - int64(max(lo, p))
			continue
		}
		if overlap > 0 && strings.HasPrefix(line, "AnonHugePages:") {
			var kb int64
			_, err := fmt.Sscanf(line, "AnonHugePages: %d kB", &kb)
			require.NoError(t, err)
			total += min(kb, overlap>>10)
			found = true
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, found, "no mapping of /proc/self/smaps overlaps %#x+%d", p, n)
	return total
}

// A new region is backed by huge pages once written, even when the heap
// memory it comes from was faulted in as 4 KiB pages before.
func TestPoolRegionIsHuge(t *testing.T) {
	needHugePages(t)
	const n = 64 << 20
	// Heap memory in 4 KiB pages, freed for the region to reuse.
	old := NoHuge(Alloc(n))
	for i := range old {
		old[i] = 1
	}
	sink = old
	sink = nil
	old = nil
	runtime.GC()
	p := testPool(t, 1<<30)
	r, err := p.get(n)
	require.NoError(t, err)
	off, ln := hugeSpan(r)
	require.Positive(t, ln)
	// The kernel may have no free huge pages at the moment the region
	// faults in (memory fragmented by the test packages running beside
	// this one; its compaction catches up later): a mapping of its own,
	// advised and written the same way right after, tells whether it has
	// them now, and the region is advised afresh (as the pool advises a new
	// region) and written again, up to three times.
	var kb, ctl int64
	for try := range 3 {
		if try > 0 {
			freshHuge(r)
		}
		for i := 0; i < len(r); i += 4096 {
			r[i] = 2
		}
		kb = anonHuge(t, addr(r)+uintptr(off), ln)
		t.Logf("region of %d MiB, try %d: %d MiB in huge pages", n>>20, try+1, kb>>10)
		if kb<<10 >= int64(ln)/2 {
			break
		}
		if ctl = controlHuge(t, n); ctl<<10 < int64(ln)/2 {
			t.Skipf("SKIPPED: the kernel has too few free huge pages now: a fresh advised mapping of %d MiB got %d MiB of them, the region %d MiB", n>>20, ctl>>10, kb>>10)
		}
	}
	require.GreaterOrEqual(t, kb<<10, int64(ln)/2, "fewer than half of the region's huge pages are huge after three tries, where a mapping of the same size got %d MiB", ctl>>10)
	sink = r
}

// needHugePages skips t where memory cannot get huge pages: with
// TDMPI_HUGEPAGES=0 (nothing is advised), or where the kernel's
// transparent huge pages are off or unknown.
func needHugePages(t *testing.T) {
	t.Helper()
	if !hugeOn {
		t.Skip("SKIPPED: TDMPI_HUGEPAGES=0: nothing is advised to use huge pages")
	}
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(b), "[madvise]") && !strings.Contains(string(b), "[always]") {
		t.Skipf("SKIPPED: transparent huge pages are off or unknown here (%q, %v)", b, err)
	}
}

// controlHuge maps n bytes outside the heap, advises them to use huge
// pages, writes them and returns how many kB of them are huge pages.
func controlHuge(t *testing.T, n int) int64 {
	t.Helper()
	m, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	defer unix.Munmap(m)
	off, ln := hugeSpan(m)
	require.NoError(t, unix.Madvise(m[off:off+ln], unix.MADV_HUGEPAGE))
	for i := off; i < off+ln; i += 4096 {
		m[i] = 1
	}
	return anonHuge(t, addr(m)+uintptr(off), ln)
}

// A new region from aroundMin up to HugeMin has the huge-page windows it
// lies in advised to use huge pages.
func TestPoolAdvisesAround(t *testing.T) {
	if !hugeOn {
		t.Skip("SKIPPED: TDMPI_HUGEPAGES=0: regions are not advised")
	}
	for _, n := range []int{256 << 10, 1 << 20, 3 << 20} {
		p := newPool()
		b, err := p.get(n)
		require.NoError(t, err)
		for _, at := range []uintptr{addr(b), addr(b) + uintptr(len(b)) - 1} {
			// "hg" is the VM_HUGEPAGE flag that MADV_HUGEPAGE sets.
			require.Contains(t, strings.Fields(vmaFlags(t, at)), "hg", "%d-byte region, byte %#x", n, at-addr(b))
		}
		runtime.KeepAlive(b)
	}
}

// A region from HugeMin up starts on a huge-page boundary, so that it is
// huge pages from end to end, and so does the same region reused.
func TestPoolRegionIsAligned(t *testing.T) {
	if !hugeOn {
		t.Skip("SKIPPED: TDMPI_HUGEPAGES=0: regions are not advised")
	}
	p := testPool(t, 1<<30)
	var pads [][]byte
	for i, n := range []int{HugeMin, HugeMin + 12345, 3*HugeMin + 1} {
		// Heap objects of 8 KiB pages between the regions: without the
		// pool's alignment, a region would start where the heap's
		// allocator puts its object, seldom on a huge page.
		pads = append(pads, allocNoZero(40<<10))
		b, err := p.get(n)
		require.NoError(t, err)
		require.Len(t, b, n)
		require.Zero(t, addr(b)%hugePage, "%d-byte request", n)
		require.Zero(t, cap(b)-n, "%d-byte request", n)
		require.Equal(t, 0, regionSize(n)%hugePage)
		want := addr(b)
		b = nil
		runtime.GC()
		require.True(t, waitReturned(p, int64(i+1)), "%d-byte request: the region did not come back", n)
		// The unwritten huge page of each idle region's heap object
		// counts in IdleHeap.
		st := p.snapshot()
		p.mu.Lock()
		idle := 0
		for _, rs := range p.free {
			idle += len(rs)
		}
		p.mu.Unlock()
		require.Positive(t, idle)
		require.Equal(t, st.Idle+int64(idle)*hugePage, st.IdleHeap, "%d-byte request", n)
		b, err = p.get(n)
		require.NoError(t, err)
		require.Equal(t, want, addr(b), "%d-byte request, reused", n)
		sink = b
	}
	runtime.KeepAlive(pads)
}
