// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// Scalar is the set of element types a buffer may hold. Each maps to one
// predefined MPI datatype: bool to MPI_C_BOOL, byte/uint8 to MPI_UINT8_T,
// the sized integers to MPI_INTn_T/MPI_UINTn_T, int and uint to the 64-bit
// ones, float32/float64 to MPI_FLOAT/MPI_DOUBLE and complex64/complex128 to
// MPI_C_FLOAT_COMPLEX/MPI_C_DOUBLE_COMPLEX. Named types with these
// underlying types are accepted too.
type Scalar interface {
	~bool | ~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~int | ~uint | ~float32 | ~float64 | ~complex64 | ~complex128
}
