// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseNoHuge asks the kernel not to back the huge-page-aligned interior
// of b with transparent huge pages. It is advice: where the kernel has
// them disabled, or refuses, nothing changes and nothing is reported.
// Pages already present stay as they are.
func adviseNoHuge(b []byte) {
	off, n := hugeSpan(b)
	if n == 0 {
		return
	}
	_ = unix.Madvise(b[off:off+n], unix.MADV_NOHUGEPAGE)
}

// freshHuge drops the pages present in the huge-page-aligned interior of
// b and advises it to use transparent huge pages, so that the first write
// faults in huge pages even where b reuses heap memory that was faulted in
// as 4 KiB pages (advice alone leaves present pages as they are). Only for
// memory whose contents do not matter: a new receive region.
func freshHuge(b []byte) {
	off, n := hugeSpan(b)
	if n == 0 {
		return
	}
	dropInterior(b)
	_ = unix.Madvise(b[off:off+n], unix.MADV_HUGEPAGE)
}

// dropInterior drops the pages present in the huge-page-aligned interior
// of b (MADV_DONTNEED: they read as zeros afterwards, and the next write
// faults pages in as the mapping's advice says). Only for memory whose
// contents do not matter.
func dropInterior(b []byte) {
	if off, n := hugeSpan(b); n > 0 {
		_ = unix.Madvise(b[off:off+n], unix.MADV_DONTNEED)
	}
}

// adviseAround advises the 2 MiB-aligned windows that b lies in, whole, to
// use transparent huge pages: for a region under HugeMin, which holds no
// huge page of its own, so that its first write faults in the huge page
// around it where none of the window's pages is present yet (new heap
// memory). The neighbours it shares a window with are heap memory too,
// which the advice leaves as it is where present.
func adviseAround(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := p &^ (hugePage - 1)
	hi := (p + uintptr(len(b)) + hugePage - 1) &^ (hugePage - 1)
	// The windows reach past b, so the call takes addresses, not a slice.
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_HUGEPAGE)
}
