// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// #include "shim.h"
import "C"

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

var ops [nOps]C.MPI_Op

var opNames = [nOps]string{"MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND", "MPI_LOR", "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR"}

// String returns the MPI name of the operation, such as "MPI_SUM".
func (o Op) String() string {
	if o >= 0 && o < nOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// validFor reports whether o applies to elements of kind k.
func (o Op) validFor(k kind) bool {
	switch o {
	case OpSum, OpProd:
		return isInteger(k) || isFloat(k) || isComplex(k)
	case OpMin, OpMax:
		return isInteger(k) || isFloat(k)
	case OpLand, OpLor, OpLxor:
		return isInteger(k) || k == kBool
	case OpBand, OpBor, OpBxor:
		return isInteger(k)
	}
	return false
}

func checkOp(name string, o Op, k kind) error {
	if o < 0 || o >= nOps {
		return argError(name, C.MPI_ERR_OP, "invalid operation %v", o)
	}
	if !o.validFor(k) {
		return argError(name, C.MPI_ERR_OP, "%v does not apply to %v", o, k)
	}
	return nil
}
