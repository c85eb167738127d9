// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build gc

package mem

import "unsafe"

// mallocgc is the Go runtime's allocator. The runtime keeps its signature
// stable for packages outside the standard library that reach it by
// linkname (see the comment above it in runtime/malloc.go and
// go.dev/issue/67401); with a nil type it allocates memory the garbage
// collector does not scan, and with needzero false it skips clearing a
// reused span.
//
//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer

// allocNoZero returns n bytes (n > 0) of pointer-free Go heap memory that
// the runtime did not clear. Every size class from 8 bytes up is 8-byte
// aligned; smaller sizes are rounded up to 8.
func allocNoZero(n int) []byte {
	p := mallocgc(uintptr((n+7)&^7), nil, false)
	return unsafe.Slice((*byte)(p), n)
}
