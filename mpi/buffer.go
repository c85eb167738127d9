// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
import "C"

import (
	"math"
	"unsafe"
)

// ops holds the predefined operations, indexed by Op.
var ops [nOps]C.MPI_Op

// Predefined handles, loaded once. They are link-time addresses in Open MPI
// and valid before MPI_Init.
var (
	datatypes   [nKinds]C.MPI_Datatype
	typeWords   [nKinds]C.tdmpi_word // datatypes as words (see tdmpi_word in shim.h)
	commWorld   = C.tdmpi_comm_world()
	commSelf    = C.tdmpi_comm_self()
	commNull    = C.tdmpi_comm_null()
	groupNull   = C.tdmpi_group_null()
	requestNull = C.tdmpi_request_null()
	messageNull = C.tdmpi_message_word(C.tdmpi_message_null())
	messageNone = C.tdmpi_message_no_proc()
	errorsRet   = C.tdmpi_errors_return()
)

func init() {
	for k := kind(1); k < nKinds; k++ {
		datatypes[k] = C.tdmpi_datatype(C.int(k))
		typeWords[k] = C.tdmpi_type_word(datatypes[k])
	}
	for o := OpSum; o < nOps; o++ {
		ops[o] = C.tdmpi_op(C.int(o))
	}
}

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

// at returns the address of element off of b, as mem does, when m > 0
// elements from there are passed to MPI, and nil otherwise.
func (b buffer) at(off, m int) *C.tdmpi_mem {
	if m <= 0 || b.ptr == nil {
		return nil
	}
	return cmem(unsafe.Add(b.ptr, off*b.size))
}

// bytes returns the size of b in bytes.
func (b buffer) bytes() C.longlong { return C.longlong(b.n) * C.longlong(b.size) }

// Large-count limits. MPI counts elements in a C int, so a buffer of more
// elements than a C int holds travels as one element of a derived datatype,
// and a reduction, which predefined operations do not apply to derived
// datatypes, runs in pieces. The big tests (TDMPI_BIG=1, make test-big)
// move 2.5 GiB of bytes through both paths; TestChunks checks the pieces.
const (
	// bigThreshold is the largest count passed to MPI as is: the largest C
	// int. Longer buffers are described by a derived datatype.
	bigThreshold = math.MaxInt32
	// bigBlock is the block length, in elements, of those derived types:
	// the largest power of two a C int count holds, the block
	// tdmpi_mrecv_truncated (shim.h) uses for bytes too.
	bigBlock = 1 << 30
	// reduceChunk is the most elements reduced per MPI call, for the same
	// reason as bigBlock.
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

// mem returns b's address as the C type that cgo does not check, as every
// call that passes MPI a buffer does (see tdmpi_word in shim.h).
func (b buffer) mem() *C.tdmpi_mem { return cmem(b.ptr) }

// cmem converts p, the address of a buffer MPI reads or writes, to the
// char pointer that shim.h's functions take: cgo checks an unsafe.Pointer
// (C void *) argument as the whole Go object it points into, and fails
// when that object also holds unpinned Go pointers (a small received
// TensorDict's storage shares one allocation with its tree); it does not
// check a pointer to char. The one conversion of package mpi.
func cmem(p unsafe.Pointer) *C.tdmpi_mem { return (*C.tdmpi_mem)(p) }

// typeWord returns the word of t (see tdmpi_word in shim.h), the datatype
// dtype returned for b: the table's for b's predefined type, a conversion
// in C for a derived one.
func (b buffer) typeWord(t C.MPI_Datatype) C.tdmpi_word {
	if t == datatypes[b.k] {
		return typeWords[b.k]
	}
	return C.tdmpi_type_word(t)
}

// bytesMem returns the address of p's first byte as the C type that cgo
// does not check (see tdmpi_word in shim.h); p is not empty.
func bytesMem(p []byte) *C.tdmpi_mem { return cmem(unsafe.Pointer(&p[0])) }

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
