// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import "golang.org/x/sys/unix"

// adviseHuge asks the kernel to back the huge-page-aligned interior of b
// with transparent huge pages. It is advice: where the kernel has them
// disabled, or refuses, b is unchanged and nothing is reported. Pages
// already present stay as they are until the kernel collapses them.
func adviseHuge(b []byte) {
	off, n := hugeSpan(b)
	if n == 0 {
		return
	}
	_ = unix.Madvise(b[off:off+n], unix.MADV_HUGEPAGE)
}

// adviseNoHuge asks the kernel not to use transparent huge pages for the
// huge-page-aligned interior of b (MADV_NOHUGEPAGE). Advice only.
func adviseNoHuge(b []byte) {
	off, n := hugeSpan(b)
	if n == 0 {
		return
	}
	_ = unix.Madvise(b[off:off+n], unix.MADV_NOHUGEPAGE)
}
