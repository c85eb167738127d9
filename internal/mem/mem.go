// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import "unsafe"

// HugeMin is two huge pages: the 2 MiB-aligned interior of any buffer
// this large holds at least one (see the receive pool).
const HugeMin = 4 << 20

// hugePage is the size of a transparent huge page on x86-64 and arm64 with
// 4 KiB base pages.
const hugePage = 2 << 20

// Alloc returns n zero bytes on the Go heap, 8-byte aligned. It panics if n
// is negative.
func Alloc(n int) []byte {
	if n < 0 {
		panic("mem: Alloc: negative size")
	}
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

// AllocUninit returns n bytes on the Go heap, 8-byte aligned, whose
// contents are undefined: they may hold bytes this process freed earlier.
// The caller must overwrite all n bytes before anything reads them, and
// must not let the slice escape if it fails to. It panics if n is
// negative.
func AllocUninit(n int) []byte {
	if n < 0 {
		panic("mem: AllocUninit: negative size")
	}
	if n == 0 {
		return []byte{}
	}
	return allocNoZero(n)
}

// Huge advises the kernel to back b with transparent huge pages, if b is
// at least aroundMin (256 KiB), and returns b: the 2 MiB-aligned windows
// b lies in, whole, its heap neighbours in them included (adviseAround),
// as the receive pool does for its regions under HugeMin. Call it on a
// new buffer, before writing to it: the pages already present in b's
// 2 MiB-aligned interior are dropped first (they read as zeros again, so
// a buffer from Alloc stays zero), as the pool does for a new region, so
// that b gets huge pages even where it reuses heap memory faulted in as
// 4 KiB pages (advice alone leaves present pages as they are); those at
// its ends, in windows shared with other objects, stay as they are. It is
// advice: where huge pages are disabled (or TDMPI_HUGEPAGES=0 is set)
// nothing changes. Benchmarks use it for baselines on huge pages in the
// Go heap; tdmpi's own storages take theirs from the receive pool.
func Huge(b []byte) []byte {
	if hugeOn && len(b) >= int(aroundMin) {
		dropInterior(b)
		adviseAround(b)
	}
	return b
}

// NoHuge advises the kernel not to back b's 2 MiB-aligned interior with
// transparent huge pages and returns b. Call it on a new buffer, before
// writing to it: the pages already present in the interior are dropped
// (they read as zeros again), so that b gets 4 KiB pages even where it
// reuses heap memory that Huge or the receive pool had faulted in as huge
// pages. Benchmarks use it for baselines of a known page size: a plain
// Go heap buffer reusing such memory keeps its huge pages, and MPI reads
// them up to twice as fast.
func NoHuge(b []byte) []byte {
	dropInterior(b)
	adviseNoHuge(b)
	return b
}

// hugeSpan returns the offset and length of the 2 MiB-aligned run of whole
// huge pages inside b, length 0 if b is smaller than HugeMin or holds none.
func hugeSpan(b []byte) (off, n int) {
	return hugeRange(uintptr(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}

// hugeRange is hugeSpan of the n bytes at address p.
func hugeRange(p uintptr, n int) (off, ln int) {
	if n < HugeMin {
		return 0, 0
	}
	off = int((p+hugePage-1)&^(hugePage-1) - p)
	if off >= n {
		return 0, 0
	}
	return off, (n - off) &^ (hugePage - 1)
}
