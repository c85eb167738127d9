// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !gc

package mem

import "unsafe"

// allocNoZero returns n bytes (n > 0), 8-byte aligned. Without the gc
// toolchain's allocator they are zeroed, as make returns them.
func allocNoZero(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}
