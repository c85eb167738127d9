// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"fmt"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// Op is an element-wise reduction, with the values and meaning of package
// tensordict's ReduceOp (see there for which dtypes each applies to).
type Op int

// The reductions, in ReduceOp's order.
const (
	Sum Op = iota
	Prod
	Min
	Max
	Avg // the sum divided by the group's size
	BitAnd
	BitOr
	BitXor
	numOps
)

var opNames = [numOps]string{"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"}

// String returns the name of o: "sum", "prod", "min", "max", "avg",
// "band", "bor" or "bxor".
func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("ReduceOp(%d)", int(o))
}

// Check returns an error if o does not apply to elements of dt.
func (o Op) Check(dt tensor.DType) error {
	_, err := o.mpiOp(dt)
	return err
}

// mpiOp returns the MPI operation that computes o on elements of dt, or an
// error if o does not apply to dt. For Avg it is the sum; the caller
// divides.
func (o Op) mpiOp(dt tensor.DType) (mpi.Op, error) {
	if o < 0 || o >= numOps {
		return 0, fmt.Errorf("invalid reduce operation %v", o)
	}
	switch o {
	case Avg:
		if !dt.IsFloat() && !dt.IsComplex() {
			return 0, fmt.Errorf("%v does not apply to %v (only to floating-point and complex leaves)", o, dt)
		}
		return mpi.OpSum, nil
	case BitAnd, BitOr, BitXor:
		bits := [...]mpi.Op{mpi.OpBand, mpi.OpBor, mpi.OpBxor}
		logic := [...]mpi.Op{mpi.OpLand, mpi.OpLor, mpi.OpLxor}
		switch {
		case dt == tensor.Bool:
			return logic[o-BitAnd], nil
		case dt.IsInteger():
			return bits[o-BitAnd], nil
		}
		return 0, fmt.Errorf("%v does not apply to %v (only to integer and bool leaves)", o, dt)
	}
	if dt == tensor.Bool {
		if o == Sum || o == Max {
			return mpi.OpLor, nil
		}
		return mpi.OpLand, nil
	}
	if dt.IsComplex() && (o == Min || o == Max) {
		return 0, fmt.Errorf("%v does not apply to %v (complex numbers are not ordered)", o, dt)
	}
	return [...]mpi.Op{mpi.OpSum, mpi.OpProd, mpi.OpMin, mpi.OpMax}[o], nil
}

// Reduce runs AllReduce (root -1) or Reduce (to root) of red's leaves
// with op, once every rank checked its structure (hash, explained by
// describe on a mismatch, comparing with root's, or rank 0's) and its op
// and root: the same on every rank, else every rank returns an error
// wrapping ErrMismatch. local is this rank's own error, which makes every
// rank fail (ShareFailure). red is nil on a rank that has no leaves to
// reduce (its local error says why).
func (cl *Call) Reduce(red *Reduction, op Op, root int, local error, hash uint64, describe func() codec.Structure) error {
	var lh uint64
	notFast := uint64(1)
	if red != nil {
		lh = red.layout
		if red.fast {
			notFast = 0
		}
	}
	// Every rank must pass the same op and root: the check compares them
	// beside the structure, as the maximum of a value and of its
	// complement, which are complements of each other only when every rank
	// gave the same value.
	r1 := uint64(root + 1)
	v, err := cl.CheckSame(hash, describe, max(root, 0), local, lh, ^lh, notFast, uint64(op), ^uint64(op), r1, ^r1)
	if err != nil {
		return err
	}
	if v[3] != ^v[4] {
		return cl.Errorf("ranks passed different ops (%v and %v): %w", Op(^v[4]), Op(v[3]), ErrMismatch)
	}
	if v[5] != ^v[6] {
		return cl.Errorf("ranks passed different roots (%d and %d): %w", int(^v[6])-1, int(v[5])-1, ErrMismatch)
	}
	cl.Defer() // the agreement is over: the reduction runs on
	t := target{s: cl.Step, root: root}
	if v[2] == 0 && v[0] == ^v[1] {
		if err := t.reduceBytes(red.span, red.leaves[0].DType(), op); err != nil {
			return cl.Errorf("reducing the storage of %d leaves: %w", len(red.leaves), err)
		}
	} else if err := cl.reduceSteps(t, red, op); err != nil {
		return err
	}
	if op != Avg || (root >= 0 && root != cl.Rank) {
		return nil
	}
	return t.s.Then(func() error {
		for i, x := range red.leaves {
			if isHalf(x.DType()) {
				continue // reduceHalf divided before the sum
			}
			if err := x.DivScalarInPlace(float64(cl.Size)); err != nil {
				return cl.Errorf("key %v: averaging: %w", red.key(i), err)
			}
		}
		return nil
	})
}

// target says where a reduction's result goes: to every rank (Allreduce,
// root < 0) or to root only (Reduce).
type target struct {
	s    xfer.Step
	root int // -1 for Allreduce
}

// gets reports whether this rank gets the result.
func (t target) gets() bool { return t.root < 0 || t.s.Comm.Rank() == t.root }

// reduceBytes reduces b, the bytes of elements of dtype dt, in place with
// op across the ranks of t.s.Comm. b must be aligned for dt.
func (t target) reduceBytes(b []byte, dt tensor.DType, op Op) error {
	mop, err := op.mpiOp(dt)
	if err != nil {
		return err
	}
	switch dt {
	case tensor.Bool:
		return reduceSlice(t, castBytes[bool](b), mop)
	case tensor.Uint8:
		return reduceSlice(t, b, mop)
	case tensor.Int8:
		return reduceSlice(t, castBytes[int8](b), mop)
	case tensor.Int16:
		return reduceSlice(t, castBytes[int16](b), mop)
	case tensor.Int32:
		return reduceSlice(t, castBytes[int32](b), mop)
	case tensor.Int64:
		return reduceSlice(t, castBytes[int64](b), mop)
	case tensor.Float32:
		return reduceSlice(t, castBytes[float32](b), mop)
	case tensor.Float64:
		return reduceSlice(t, castBytes[float64](b), mop)
	case tensor.Complex64:
		return reduceSlice(t, castBytes[complex64](b), mop)
	case tensor.Complex128:
		return reduceSlice(t, castBytes[complex128](b), mop)
	case tensor.Float16:
		return reduceHalf(t, castBytes[tensor.F16](b), mop, op == Avg, tensor.F16.Float32, tensor.F16FromFloat32)
	case tensor.BFloat16:
		return reduceHalf(t, castBytes[tensor.BF16](b), mop, op == Avg, tensor.BF16.Float32, tensor.BF16FromFloat32)
	}
	return fmt.Errorf("dtype %v cannot be reduced", dt)
}

// ReducePiece bounds the bytes of one MPI reduction. MPI's reductions
// allocate a temporary buffer of the message's size, and glibc's malloc
// maps a block of 32 MiB or more afresh on every call (its mmap
// threshold, which adapts up to 32 MiB on 64-bit machines), so that the
// buffer's pages fault in every time: on this project's VM one
// MPI_Allreduce of 256 MiB of float32 took 75-82 ms, sixteen of 16 MiB
// 17-18 ms (Open MPI at np 2; 3.5x at np 4; MPICH the same), and one of
// 32 MiB was as slow per byte as one of 256 MiB, while with glibc's
// threshold raised (MALLOC_MMAP_THRESHOLD_) every size ran fast. Pieces of
// 4-24 MiB ran at 14-19 GB/s, of 1 MiB at 13.
const ReducePiece = 16 << 20

// reduceSlice reduces s in place: on every rank for Allreduce, at the root
// for Reduce (the other ranks' s is only read), in pieces of at most
// ReducePiece bytes. Every rank makes the same calls: s has the same
// length on every rank.
func reduceSlice[T mpi.Scalar](t target, s []T, op mpi.Op) error {
	n := ReducePiece / int(unsafe.Sizeof(s[0]))
	for off := 0; ; off += n { // one call for an empty s, as for any other
		end := min(off+n, len(s))
		var err error
		if t.root < 0 {
			err = xfer.Allreduce(t.s, s[off:end], op)
		} else {
			err = xfer.Reduce(t.s, s[off:end], op, t.root)
		}
		if err != nil || end == len(s) {
			return err
		}
	}
}

// halfChunk is the number of half-precision elements widened at a time, so
// that reducing a large half leaf needs a bounded scratch buffer.
const halfChunk = 1 << 22

// isHalf reports whether dt is one of the half-precision dtypes that
// reduceHalf reduces through float32.
func isHalf(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

// reduceHalf reduces half-precision elements through float32: each chunk is
// widened, reduced as float32, and rounded back. With avg (Avg, op the
// sum), every rank divides its elements by the group's size as it widens
// them, before the sum (as NCCL's average does), so that a mean that fits
// in half precision is never lost to a sum that does not: 60000 and 60000
// in float16, whose sum overflows it, or 3e38 and 3e38 in bfloat16, whose
// sum overflows float32 too. The caller does not divide half leaves again.
func reduceHalf[H ~uint16](t target, s []H, op mpi.Op, avg bool, widen func(H) float32, narrow func(float32) H) error {
	div := float32(1)
	if avg {
		div = float32(t.s.Comm.Size())
	}
	buf := make([]float32, min(len(s), halfChunk))
	for off := 0; off < len(s) || off == 0; off += halfChunk {
		part := s[off:min(off+halfChunk, len(s))]
		if t.s.Deferred != nil && off > 0 {
			buf = make([]float32, len(part)) // the previous chunk's is in flight
		}
		f := buf[:len(part)]
		for i, h := range part {
			f[i] = widen(h) / div
		}
		if err := reduceSlice(t, f, op); err != nil {
			return err
		}
		if t.gets() {
			_ = t.s.Then(func() error {
				for i, v := range f {
					part[i] = narrow(v)
				}
				return nil
			})
		}
		if len(s) == 0 {
			break
		}
	}
	return nil
}

// castBytes views b as a slice of T. b's length must be a multiple of T's
// size and its address aligned for T, which tensor storage guarantees.
func castBytes[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return []T{}
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// reduceLeaf reduces one leaf in place. A leaf that is not contiguous is
// reduced through a contiguous copy, written back where the result lands.
func (t target) reduceLeaf(x *tensor.Tensor, op Op) error {
	if x.Numel() == 0 {
		return nil
	}
	if b, err := x.Bytes(); err == nil {
		return t.reduceBytes(b, x.DType(), op)
	}
	tmp := x.Clone()
	b, err := tmp.Bytes()
	if err != nil {
		return err
	}
	if err := t.reduceBytes(b, x.DType(), op); err != nil {
		return err
	}
	if t.gets() {
		return t.s.Then(func() error { return x.CopyFrom(tmp) })
	}
	return nil
}
