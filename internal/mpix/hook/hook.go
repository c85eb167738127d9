// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package hook is the table through which package mpi hands package
// internal/mpix the operations that only tdmpi's own packages use. Package
// mpi imports it and fills it in its init; mpix, which imports mpi, reads
// it once at its own initialisation, so that no program sees these
// operations in mpi's API. Nothing else uses this package.
//
// Each variable holds a function of package mpi of the type that mpix
// asserts (its signature names mpi's types, which this package cannot
// import): see the mpix function of the same name.
package hook

// CopySendMax is the largest message that mpix.SendCopy sends from a copy:
// under the 4 KiB eager limit of Open MPI's shared-memory transport
// (which counts its own headers too), so that a send it starts moves
// without the receiver's answer.
const CopySendMax = 4000

// The functions of package mpi behind internal/mpix's of the same names.
// Those on an mpi.Message take it by value and return it as the call left
// it, which mpix stores back: a pointer passed to a function value
// escapes, and would move the caller's Message to the heap.
var (
	AfterInFlight any
	InFlight      any
	WaitCopies    any
	Yield         any

	SendCopy        any
	SendConcat      any
	SendBlocksUntil any
	SendUntil       any
	MprobeUntil     any
	MrecvUntil      any
	MrecvConcat     any

	RecvExactUntil any

	// IbcastUntil and IallreduceUntil take the buffer as its bytes and
	// its element type (a reflect.Type), since a function value cannot
	// be generic.
	IbcastUntil     any
	IallreduceUntil any
)
