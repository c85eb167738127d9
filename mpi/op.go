// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "fmt"

// Op is a predefined MPI reduction operation.
type Op int

// Reduction operations. Sum and Prod apply to integers, floats and complex
// numbers; Min and Max to integers and floats; the logical operations Land,
// Lor and Lxor to integers and bool; the bitwise operations Band, Bor and Bxor
// to integers.
const (
	OpSum  Op = iota // sum
	OpProd           // product
	OpMin            // minimum
	OpMax            // maximum
	OpLand           // logical and
	OpLor            // logical or
	OpLxor           // logical exclusive or
	OpBand           // bitwise and
	OpBor            // bitwise or
	OpBxor           // bitwise exclusive or
	nOps
)

var opNames = [nOps]string{"MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND", "MPI_LOR", "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR"}

// String returns the MPI name of the operation, such as "MPI_SUM".
func (o Op) String() string {
	if o >= 0 && o < nOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}
