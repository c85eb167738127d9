// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "unsafe"

// Status describes a received or probed message: its source rank, its tag
// and its size in bytes.
type Status struct {
	Source int // rank of the sender, or ProcNull
	Tag    int // tag of the message
	// bytes is the message size in bytes, -1 if MPI could not tell.
	bytes     int64
	cancelled bool
}

// Bytes returns the size of the message in bytes, or -1 if it is unknown
// (a message whose size is not a whole number of the receive's elements).
func (s Status) Bytes() int64 { return s.bytes }

// Count returns the number of elements of elemSize bytes in the message,
// or -1 if the size is unknown or not a multiple of elemSize.
func (s Status) Count(elemSize int) int64 {
	if elemSize <= 0 || s.bytes < 0 || s.bytes%int64(elemSize) != 0 {
		return -1
	}
	return s.bytes / int64(elemSize)
}

// Cancelled reports whether the request this status came from was
// cancelled (see Request.Cancel).
func (s Status) Cancelled() bool { return s.cancelled }

// Count returns the number of elements of type T in the message s
// describes, or -1 if unknown. It is Status.Count with the size of T.
func Count[T Scalar](s Status) int {
	var z T
	return int(s.Count(int(unsafe.Sizeof(z))))
}
