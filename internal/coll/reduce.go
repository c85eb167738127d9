// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
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
	st := steadies.Of(cl.Group)
	if st.sig != 0 {
		if done, err := cl.reduceSteady(st, red, op, root, local, hash); done {
			return err
		}
	}
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
	if err == nil && v[3] != ^v[4] {
		err = cl.Errorf("ranks passed different ops (%v and %v): %w", Op(^v[4]), Op(v[3]), ErrMismatch)
	}
	if err == nil && v[5] != ^v[6] {
		err = cl.Errorf("ranks passed different roots (%d and %d): %w", int(^v[6])-1, int(v[5])-1, ErrMismatch)
	}
	st.agreed(red, op, root, hash, err)
	if err != nil {
		return err
	}
	cl.Defer() // the agreement is over: the reduction runs on
	return cl.reduceData(red, op, root, v[2] == 0 && v[0] == ^v[1])
}

// reduceData reduces red's leaves with op, once the ranks agreed: as one
// span when every rank's leaves tile one storage in the same layout
// (fast), else step by step.
func (cl *Call) reduceData(red *Reduction, op Op, root int, fast bool) error {
	t := target{s: cl.Step, root: root}
	if fast {
		if err := t.reduceBytes(red.span, red.leaves[0].DType(), op); err != nil {
			return cl.Errorf("reducing the storage of %d leaves: %w", len(red.leaves), err)
		}
	} else if err := cl.reduceSteps(t, red, op); err != nil {
		return err
	}
	if op != Avg || (root >= 0 && root != cl.Rank) {
		return nil
	}
	return t.s.Then(func() error { return cl.average(red) })
}

// average divides the sums of red's leaves by the group's size, but for
// half-precision leaves, which reduceHalf divided before the sum.
func (cl *Call) average(red *Reduction) error {
	for i, x := range red.leaves {
		if isHalf(x.DType()) {
			continue
		}
		if err := x.DivScalarInPlace(float64(cl.Size)); err != nil {
			return cl.Errorf("key %v: averaging: %w", red.key(i), err)
		}
	}
	return nil
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

// A Reduction is how a list of leaves is reduced, worked out once
// (PlanReduction) for as long as the leaves stay the same: as one span of
// bytes when they tile one storage (fast), else step by step, each step a
// large leaf or a bucket of small ones.
type Reduction struct {
	leaves []*tensor.Tensor // in the order every rank reduces them in
	key    func(i int) any  // names leaf i in errors
	span   []byte
	layout uint64 // a hash of the span's layout, which the ranks compare
	fast   bool
	steps  []reduceStep
	// For Check: each dtype and each storage with its first leaf, and the
	// first leaf that repeats elements (an Expand result), len(leaves) for
	// none.
	dtypes   []firstLeaf[tensor.DType]
	storages []firstLeaf[*tensor.Storage]
	repeats  int
	bytes    int // of every leaf
}

// firstLeaf is a value of a Reduction's leaves and the first leaf of it.
type firstLeaf[T any] struct {
	v    T
	leaf int
}

// PlanReduction returns the reduction of leaves, given in the order every
// rank takes them (tensordict's sorted key order); key(i) names leaf i in
// errors. It reads the leaves' bytes (tensor.Storage.Bytes).
func PlanReduction(leaves []*tensor.Tensor, key func(i int) any) *Reduction {
	r := &Reduction{leaves: leaves, key: key, steps: planSteps(leaves), repeats: len(leaves)}
	r.span, r.layout, r.fast = fastSpan(leaves)
	seen := make(map[*tensor.Storage]bool)
	for i, x := range leaves {
		if !slices.ContainsFunc(r.dtypes, func(d firstLeaf[tensor.DType]) bool { return d.v == x.DType() }) {
			r.dtypes = append(r.dtypes, firstLeaf[tensor.DType]{x.DType(), i})
		}
		if st := x.Storage(); !seen[st] {
			seen[st] = true
			r.storages = append(r.storages, firstLeaf[*tensor.Storage]{st, i})
		}
		if r.repeats == len(leaves) && repeatsElements(x) {
			r.repeats = i
		}
		r.bytes += x.NBytes()
	}
	return r
}

// Check returns an error naming the first leaf that op cannot reduce in
// place: a dtype op does not apply to, a released storage (or a mapped
// file that cannot be read), or a view that repeats elements (an Expand
// result), which has no place to put distinct results. Of one leaf's
// faults, the first in that order is named. What can change after
// PlanReduction, a storage released or a file truncated, is checked anew.
func (r *Reduction) Check(op Op) error {
	first, err := len(r.leaves), error(nil)
	fault := func(i int, e error) {
		if i < first {
			first, err = i, e
		}
	}
	for _, d := range r.dtypes {
		if _, e := op.mpiOp(d.v); e != nil {
			fault(d.leaf, e)
		}
	}
	for _, s := range r.storages {
		if s.v.Released() {
			fault(s.leaf, errors.New("storage was released"))
			continue
		}
		// MPI reduces in place, in C, where a fault (a mapped file
		// another process truncated) cannot be caught: check first. Go
		// heap memory cannot fault.
		if s.v.External() {
			if e := mem.Readable(s.v.Bytes()); e != nil {
				fault(s.leaf, e)
			}
		}
	}
	if r.repeats < first {
		x := r.leaves[r.repeats]
		first, err = r.repeats, fmt.Errorf("leaf of shape %v repeats elements (strides %v, an expanded view); call Contiguous first", x.Shape(), x.Strides())
	}
	if err != nil {
		return fmt.Errorf("key %v: %w", r.key(first), err)
	}
	return nil
}

// Hold holds, in h, the storages of r's leaves, which MPI reduces in
// place.
func (r *Reduction) Hold(h *Holds) error {
	for i, x := range r.leaves {
		if err := h.Add(x.Storage()); err != nil {
			return fmt.Errorf("key %v: %w", r.key(i), err)
		}
	}
	return nil
}

// repeatsElements reports whether x is a view that repeats elements (a
// stride of 0 along a dimension of more than one).
func repeatsElements(x *tensor.Tensor) bool {
	if x.Numel() <= 1 {
		return false
	}
	shape, strides := x.Shape(), x.Strides()
	for i := range shape {
		if shape[i] > 1 && strides[i] == 0 {
			return true
		}
	}
	return false
}

// fastSpan reports whether the leaves can be reduced as one buffer: they
// are non-empty, of one dtype, contiguous, and tile one storage with only
// the padding of a consolidated layout (fewer than 8 bytes) between them.
// It returns that buffer and a hash of the layout (dtype, length and each
// leaf's offset in key order), which the ranks compare: the fast path is
// taken only when every rank can take it with the same layout.
func fastSpan(leaves []*tensor.Tensor) (span []byte, layout uint64, ok bool) {
	if len(leaves) == 0 {
		return nil, 0, false
	}
	dt, st := leaves[0].DType(), leaves[0].Storage()
	es := dt.Size()
	type rng struct{ off, end int }
	rs := make([]rng, len(leaves))
	for i, x := range leaves {
		if x.DType() != dt || x.Storage() != st || !x.IsContiguous() || x.Numel() == 0 {
			return nil, 0, false
		}
		rs[i] = rng{x.Offset(), x.Offset() + x.NBytes()}
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b rng) int { return a.off - b.off })
	lo, hi := sorted[0].off, sorted[0].end
	for _, r := range sorted[1:] {
		if r.off < hi || r.off-hi >= 8 {
			return nil, 0, false
		}
		hi = r.end
	}
	for _, r := range rs {
		if (r.off-lo)%es != 0 {
			return nil, 0, false
		}
	}
	if (hi-lo)%es != 0 || st.Released() {
		return nil, 0, false
	}
	h := make([]byte, 0, 16+8*len(rs))
	h = binary.LittleEndian.AppendUint64(h, uint64(dt))
	h = binary.LittleEndian.AppendUint64(h, uint64(hi-lo))
	for _, r := range rs {
		h = binary.LittleEndian.AppendUint64(h, uint64(r.off-lo))
	}
	return st.Bytes()[lo:hi:hi], codec.FNV64a(h), true
}

// When the leaves cannot be reduced as one storage, small leaves are
// still not reduced one MPI call each: the leaves of one dtype smaller than
// BucketLeafMax are copied, in order, into buckets of up to bucketBytes,
// each reduced by one call and copied back. Up to a few hundred kilobytes,
// copying a leaf twice costs less than one more MPI collective: on this
// project's VM (np 2, shared memory) an MPI_Allreduce of 64 KiB took 20 us
// and one of 1 MiB 180 us, and 16 leaves of 64 KiB took 360-380 us one
// call each against 220-290 us in one bucket, 16 of 128 KiB 580-610
// against 470-490 us, 16 of 256 KiB the same either way (tdmpi bench, two
// alternating runs of builds with each limit). Larger leaves are reduced
// in place, one call each. Every rank holds the same structure (checked
// before), so every rank forms the same buckets.
const (
	BucketLeafMax = 256 << 10
	bucketBytes   = 4 << 20
)

// bucketPool keeps bucket buffers of bucketBytes between reductions, so
// that a training loop's AllReduce does not allocate.
var bucketPool = sync.Pool{New: func() any {
	b := make([]uint64, bucketBytes/8)
	return &b
}}

// A reduceStep is one MPI reduction of a Reduction that is not fast: one
// leaf in place, or a bucket of small leaves of one dtype, copied into a
// buffer of bytes bytes (each leaf at a multiple of 8).
type reduceStep struct {
	leaves []int // indices into the leaves, in order
	bytes  int   // the bucket's size; 0 for a leaf reduced in place
	// A bucket's leaves: where each lies in the bucket and, for a
	// contiguous leaf, its bytes (nil for one copied through its tensor).
	offs  []int
	views [][]byte
}

// planSteps returns the steps of a reduction of leaves that is not fast:
// dtype by dtype, leaves of BucketLeafMax bytes and more alone, smaller
// ones in buckets of up to bucketBytes (a bucket of one leaf is that leaf
// alone); empty leaves are left out.
func planSteps(leaves []*tensor.Tensor) []reduceStep {
	var steps []reduceStep
	var pending []int
	pendingBytes := 0
	flush := func() {
		switch len(pending) {
		case 0:
			return
		case 1:
			steps = append(steps, reduceStep{leaves: pending})
		default:
			st := reduceStep{leaves: pending, bytes: pendingBytes, offs: make([]int, len(pending)), views: make([][]byte, len(pending))}
			off := 0
			for j, i := range pending {
				x := leaves[i]
				st.offs[j] = off
				if x.IsContiguous() {
					st.views[j], _ = x.Bytes() // nil for a released storage, which the caller refuses
				}
				off += roundUp8(x.NBytes())
			}
			steps = append(steps, st)
		}
		pending, pendingBytes = nil, 0
	}
	for _, dt := range tensor.DTypes() {
		for i, x := range leaves {
			if x.DType() != dt || x.Numel() == 0 {
				continue
			}
			n := x.NBytes()
			if n >= BucketLeafMax {
				steps = append(steps, reduceStep{leaves: []int{i}})
				continue
			}
			if pendingBytes+roundUp8(n) > bucketBytes {
				flush()
			}
			pending = append(pending, i)
			pendingBytes += roundUp8(n)
		}
		flush()
	}
	return steps
}

// reduceSteps reduces red's leaves by its steps.
func (cl *Call) reduceSteps(t target, red *Reduction, op Op) error {
	var buf []uint64
	defer func() {
		if cap(buf) == bucketBytes/8 {
			bucketPool.Put(&buf)
		}
	}()
	leaves := red.leaves
	for _, s := range red.steps {
		if s.bytes == 0 {
			if err := t.reduceLeaf(leaves[s.leaves[0]], op); err != nil {
				return cl.Errorf("key %v: %w", red.key(s.leaves[0]), err)
			}
			continue
		}
		if cap(buf) < s.bytes/8 || t.s.Deferred != nil {
			// Deferred steps: every bucket is in flight until Wait, so each
			// has its own buffer, back to the pool once copied back.
			buf = *bucketPool.Get().(*[]uint64)
		}
		own := buf
		b := WordsAsBytes(buf[:s.bytes/8])
		for j, i := range s.leaves {
			if v := s.views[j]; v != nil {
				copy(b[s.offs[j]:], v)
			} else if err := copyOut(b[s.offs[j]:], leaves[i]); err != nil {
				return cl.Errorf("key %v: %w", red.key(i), err)
			}
		}
		if err := t.reduceBytes(b, leaves[s.leaves[0]].DType(), op); err != nil {
			return cl.Errorf("keys %v to %v: %w", red.key(s.leaves[0]), red.key(s.leaves[len(s.leaves)-1]), err)
		}
		if t.s.Deferred != nil {
			buf = nil // the deferred copy-back returns it to the pool
		}
		if err := t.s.Then(func() error {
			if t.s.Deferred != nil {
				defer bucketPool.Put(&own)
			}
			if !t.gets() {
				return nil
			}
			for j, i := range s.leaves {
				if v := s.views[j]; v != nil {
					copy(v, b[s.offs[j]:])
				} else if err := copyIn(leaves[i], b[s.offs[j]:s.offs[j]+leaves[i].NBytes()]); err != nil {
					return cl.Errorf("key %v: %w", red.key(i), err)
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// roundUp8 rounds n up to a multiple of 8, so that every leaf in a bucket
// starts aligned for its dtype (a complex128 bucket holds only multiples of
// 16 bytes, so its leaves stay aligned too).
func roundUp8(n int) int { return (n + 7) &^ 7 }

// copyOut copies the elements of x, in row-major order, into b.
func copyOut(b []byte, x *tensor.Tensor) error {
	src, err := x.Bytes()
	if err != nil {
		if src, err = x.Clone().Bytes(); err != nil {
			return err
		}
	}
	copy(b, src)
	return nil
}

// copyIn copies b, the row-major elements of x, back into x.
func copyIn(x *tensor.Tensor, b []byte) error {
	if dst, err := x.Bytes(); err == nil {
		copy(dst, b)
		return nil
	}
	src, err := tensor.FromBytes(x.DType(), b, x.Shape()...)
	if err != nil {
		return err
	}
	return x.CopyFrom(src)
}
