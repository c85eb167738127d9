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
