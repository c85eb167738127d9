// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// #include "shim.h"
import "C"

import (
	"math"
	"reflect"
	"unsafe"
)

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

// kind indexes the datatype table; the values match tdmpi_datatype in shim.h.
type kind uint8

const (
	kInvalid kind = iota
	kBool
	kInt8
	kUint8
	kInt16
	kUint16
	kInt32
	kUint32
	kInt64
	kUint64
	kFloat32
	kFloat64
	kComplex64
	kComplex128
	kByte
	nKinds
)

// Predefined handles, loaded once. They are link-time addresses in Open MPI
// and valid before MPI_Init.
var (
	datatypes   [nKinds]C.MPI_Datatype
	commWorld   = C.tdmpi_comm_world()
	commSelf    = C.tdmpi_comm_self()
	commNull    = C.tdmpi_comm_null()
	groupNull   = C.tdmpi_group_null()
	requestNull = C.tdmpi_request_null()
	messageNull = C.tdmpi_message_null()
	messageNone = C.tdmpi_message_no_proc()
	errorsRet   = C.tdmpi_errors_return()
)

func init() {
	for k := kind(1); k < nKinds; k++ {
		datatypes[k] = C.tdmpi_datatype(C.int(k))
	}
	for o := OpSum; o < nOps; o++ {
		ops[o] = C.tdmpi_op(C.int(o))
	}
}

var reflectKinds = [...]kind{
	reflect.Bool:       kBool,
	reflect.Int8:       kInt8,
	reflect.Uint8:      kUint8,
	reflect.Int16:      kInt16,
	reflect.Uint16:     kUint16,
	reflect.Int32:      kInt32,
	reflect.Uint32:     kUint32,
	reflect.Int64:      kInt64,
	reflect.Uint64:     kUint64,
	reflect.Int:        kInt64,
	reflect.Uint:       kUint64,
	reflect.Float32:    kFloat32,
	reflect.Float64:    kFloat64,
	reflect.Complex64:  kComplex64,
	reflect.Complex128: kComplex128,
}

func init() {
	if unsafe.Sizeof(int(0)) != 8 {
		reflectKinds[reflect.Int] = kInt32
		reflectKinds[reflect.Uint] = kUint32
	}
}

// kindOf returns the datatype kind of T.
func kindOf[T Scalar]() kind {
	var z T
	switch any(z).(type) {
	case byte:
		return kUint8
	case float64:
		return kFloat64
	case float32:
		return kFloat32
	case int64:
		return kInt64
	case int32:
		return kInt32
	case int:
		return reflectKinds[reflect.Int]
	}
	return reflectKinds[reflect.TypeFor[T]().Kind()]
}

func isInteger(k kind) bool { return k >= kInt8 && k <= kUint64 || k == kByte }
func isFloat(k kind) bool   { return k == kFloat32 || k == kFloat64 }
func isComplex(k kind) bool { return k == kComplex64 || k == kComplex128 }

var kindNames = [nKinds]string{"invalid", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
	"int64", "uint64", "float32", "float64", "complex64", "complex128", "byte"}

func (k kind) String() string { return kindNames[k] }

// buffer describes a typed Go slice handed to MPI: its address (nil when
// empty), element count, and datatype.
type buffer struct {
	ptr  unsafe.Pointer
	n    int
	k    kind
	size int
}

func bufOf[T Scalar](s []T) buffer {
	var z T
	b := buffer{n: len(s), k: kindOf[T](), size: int(unsafe.Sizeof(z))}
	if len(s) > 0 {
		b.ptr = unsafe.Pointer(unsafe.SliceData(s))
	}
	return b
}

// at returns the address of element off of b when m > 0 elements from there
// are passed to MPI, and nil otherwise.
func (b buffer) at(off, m int) unsafe.Pointer {
	if m <= 0 || b.ptr == nil {
		return nil
	}
	return unsafe.Add(b.ptr, off*b.size)
}

// bytes returns the size of b in bytes.
func (b buffer) bytes() C.longlong { return C.longlong(b.n) * C.longlong(b.size) }

// Large-count parameters; variables so that tests can exercise the
// large-message paths with small buffers.
var (
	// bigThreshold is the largest count passed to MPI as is; longer buffers
	// are described by a derived datatype.
	bigThreshold = math.MaxInt32
	// bigBlock is the block length, in elements, of those derived types.
	bigBlock = 1 << 30
	// reduceChunk is the number of elements reduced per MPI call.
	// Predefined operations do not apply to derived datatypes, so longer
	// buffers are reduced in pieces.
	reduceChunk = 1 << 30
)

// dtype returns the datatype and count describing b. When b has more than
// bigThreshold elements, it builds a committed derived datatype of count 1,
// which the caller must release with freeType.
func (b buffer) dtype(op string) (C.MPI_Datatype, C.int, bool, error) {
	if b.n <= bigThreshold {
		return datatypes[b.k], C.int(b.n), false, nil
	}
	var t C.MPI_Datatype
	if err := newError(op, C.tdmpi_type_big(datatypes[b.k], C.MPI_Count(b.n), C.MPI_Count(bigBlock), &t)); err != nil {
		return t, 0, false, err
	}
	return t, 1, true, nil
}

func freeType(t C.MPI_Datatype, derived bool) {
	if derived {
		C.tdmpi_type_free(t)
	}
}

// count32 converts a count for calls that take a C int count.
func count32(op string, n int) (C.int, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, argError(op, C.MPI_ERR_COUNT, "count %d out of range [0, %d]", n, math.MaxInt32)
	}
	return C.int(n), nil
}
