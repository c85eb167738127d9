package tensordict

import (
	"fmt"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// ReduceOp is the element-wise operation AllReduce and Reduce combine the
// ranks' leaves with, like torch.distributed.ReduceOp.
//
// Sum and Prod apply to every dtype; Min and Max to every dtype but the
// complex ones. On bool leaves Sum and Max are a logical or, Prod and Min a
// logical and, as torch does. Float16 and BFloat16 have no MPI datatype:
// their leaves are widened to float32, reduced, and rounded back to the
// nearest half value once, at the end (so a sum is at least as accurate as
// torch's, which accumulates in half precision).
type ReduceOp int

// The reduction operations. The zero value is ReduceSum, tensordict's
// default (op=None).
//
// ReduceAvg is the sum divided by the group's size, on floating-point and
// complex leaves only (an integer or bool leaf is refused on every rank
// before anything moves: torch's integer division would truncate, and
// tdmpi does not guess); float16 and bfloat16 leaves are rounded after the
// sum and again after the division. With Reduce, only the destination
// divides. ReduceBitAnd, ReduceBitOr and ReduceBitXor are bitwise on
// integer leaves and logical on bool leaves, as torch's BAND, BOR and BXOR;
// a floating-point leaf is refused on every rank.
const (
	ReduceSum    ReduceOp = iota // element-wise sum
	ReduceProd                   // element-wise product
	ReduceMin                    // element-wise minimum
	ReduceMax                    // element-wise maximum
	ReduceAvg                    // element-wise mean over the ranks
	ReduceBitAnd                 // bitwise (bool: logical) and
	ReduceBitOr                  // bitwise (bool: logical) or
	ReduceBitXor                 // bitwise (bool: logical) exclusive or
	numReduceOps
)

var reduceOpNames = [numReduceOps]string{"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"}

// String returns the name of o: "sum", "prod", "min", "max", "avg",
// "band", "bor" or "bxor".
func (o ReduceOp) String() string {
	if o >= 0 && o < numReduceOps {
		return reduceOpNames[o]
	}
	return fmt.Sprintf("ReduceOp(%d)", int(o))
}

// mpiOp returns the MPI operation that computes o on elements of dt, or an
// error if o does not apply to dt. For ReduceAvg it is the sum; the caller
// divides.
func (o ReduceOp) mpiOp(dt tensor.DType) (mpi.Op, error) {
	if o < 0 || o >= numReduceOps {
		return 0, fmt.Errorf("invalid reduce operation %v", o)
	}
	switch o {
	case ReduceAvg:
		if !dt.IsFloat() && !dt.IsComplex() {
			return 0, fmt.Errorf("%v does not apply to %v (only to floating-point and complex leaves)", o, dt)
		}
		return mpi.OpSum, nil
	case ReduceBitAnd, ReduceBitOr, ReduceBitXor:
		bits := [...]mpi.Op{mpi.OpBand, mpi.OpBor, mpi.OpBxor}
		logic := [...]mpi.Op{mpi.OpLand, mpi.OpLor, mpi.OpLxor}
		switch {
		case dt == tensor.Bool:
			return logic[o-ReduceBitAnd], nil
		case dt.IsInteger():
			return bits[o-ReduceBitAnd], nil
		}
		return 0, fmt.Errorf("%v does not apply to %v (only to integer and bool leaves)", o, dt)
	}
	if dt == tensor.Bool {
		if o == ReduceSum || o == ReduceMax {
			return mpi.OpLor, nil
		}
		return mpi.OpLand, nil
	}
	if dt.IsComplex() && (o == ReduceMin || o == ReduceMax) {
		return 0, fmt.Errorf("%v does not apply to %v (complex numbers are not ordered)", o, dt)
	}
	return [...]mpi.Op{mpi.OpSum, mpi.OpProd, mpi.OpMin, mpi.OpMax}[o], nil
}

// reduceTarget says where a reduction's result goes: to every rank
// (Allreduce, root < 0) or to root only (Reduce).
type reduceTarget struct {
	s    xfer.Step
	root int // -1 for Allreduce
}

// reduceBytes reduces b, the bytes of n elements of dtype dt, in place with
// op across the ranks of t.s.Comm. b must be aligned for dt.
func (t reduceTarget) reduceBytes(b []byte, dt tensor.DType, op ReduceOp) error {
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
		return reduceHalf(t, castBytes[tensor.F16](b), mop, tensor.F16.Float32, tensor.F16FromFloat32)
	case tensor.BFloat16:
		return reduceHalf(t, castBytes[tensor.BF16](b), mop, tensor.BF16.Float32, tensor.BF16FromFloat32)
	}
	return fmt.Errorf("dtype %v cannot be reduced", dt)
}

// reduceSlice reduces s in place: on every rank for Allreduce, at the root
// for Reduce (the other ranks' s is only read).
func reduceSlice[T mpi.Scalar](t reduceTarget, s []T, op mpi.Op) error {
	if t.root < 0 {
		return xfer.Allreduce(t.s, s, op)
	}
	return xfer.Reduce(t.s, s, op, t.root)
}

// halfChunk is the number of half-precision elements widened at a time, so
// that reducing a large half leaf needs a bounded scratch buffer.
const halfChunk = 1 << 22

// reduceHalf reduces half-precision elements through float32: each chunk is
// widened, reduced as float32, and rounded back.
func reduceHalf[H ~uint16](t reduceTarget, s []H, op mpi.Op, widen func(H) float32, narrow func(float32) H) error {
	buf := make([]float32, min(len(s), halfChunk))
	for off := 0; off < len(s) || off == 0; off += halfChunk {
		part := s[off:min(off+halfChunk, len(s))]
		if t.s.Deferred != nil && off > 0 {
			buf = make([]float32, len(part)) // the previous chunk's is in flight
		}
		f := buf[:len(part)]
		for i, h := range part {
			f[i] = widen(h)
		}
		if err := reduceSlice(t, f, op); err != nil {
			return err
		}
		if t.root < 0 || t.s.Comm.Rank() == t.root {
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
