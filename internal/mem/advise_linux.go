// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import "golang.org/x/sys/unix"

// adviseHuge asks the kernel to back the huge-page-aligned interior of b
// with transparent huge pages (on) or not to (off). It is advice: where
// the kernel has them disabled, or refuses, nothing changes and nothing is
// reported. Pages already present stay as they are.
func adviseHuge(b []byte, on bool) {
	off, n := hugeSpan(b)
	if n == 0 {
		return
	}
	advice := unix.MADV_NOHUGEPAGE
	if on {
		advice = unix.MADV_HUGEPAGE
	}
	_ = unix.Madvise(b[off:off+n], advice)
}

// freshHuge drops the pages present in the huge-page-aligned interior of
// b (MADV_DONTNEED: they read as zeros afterwards) and advises it to use
// transparent huge pages, so that the first write faults in huge pages
// even where b reuses heap memory that was faulted in as 4 KiB pages
// (advice alone leaves present pages as they are). Only for memory whose
// contents do not matter: a new receive region.
func freshHuge(b []byte) {
	off, n := hugeSpan(b)
	if n == 0 {
		return
	}
	_ = unix.Madvise(b[off:off+n], unix.MADV_DONTNEED)
	_ = unix.Madvise(b[off:off+n], unix.MADV_HUGEPAGE)
}
