package tensordict

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

// AllReduce combines the tensor leaves of td across every rank of the group
// with op, in place: afterwards every rank's leaf holds the element-wise
// sum (product, minimum, maximum) of all ranks' leaves, like tensordict's
// all_reduce. Every rank of the group calls it.
//
// The ranks must hold TensorDicts of the same structure: the same batch
// size and the same tensor leaves (keys, dtypes, shapes), in any insertion
// order: leaves are matched by key, in sorted depth-first key order.
// Non-tensor values are left alone. The structure is checked first, by
// comparing a hash of it across the ranks; if it differs, every rank
// returns a *StructureError naming the first differing key, and no leaf is
// changed.
//
// When every leaf is of one dtype and the leaves tile one storage in the
// same layout on every rank (a TensorDict returned by Consolidate,
// FromRemoteInit or Broadcast, say), the whole storage is reduced in one
// MPI call. Otherwise leaves are taken dtype by dtype, in sorted key order
// within a dtype: leaves of 256 KiB and more are reduced in place one call
// each, smaller ones are copied into buckets of up to 4 MiB, one call per
// bucket. Either way every rank makes the same calls, whatever its
// insertion order. A TensorDict reduced again and again, such as a model's
// gradients, is fastest consolidated once and then updated in place
// through its leaves: one call over a storage on huge pages (np 2 on this
// project's VM, 16 leaves and 4-8 MiB in all: 0.69-0.73x one raw
// MPI_Allreduce of heap memory, against 1.9-2.0x with each leaf in a heap
// storage of its own). Leaves that are not contiguous are reduced through a
// copy and written back; a leaf that repeats elements (an Expand result)
// is refused. Nested TensorDicts use the same group (Python tensordict's
// reduce falls back to the default group there).
//
// See ReduceOp for the dtypes each operation accepts. Options: WithGroup,
// WithContext (checked before the reduction starts; MPI cannot cancel it
// once under way).
func (td *TensorDict) AllReduce(op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("AllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *collCall) error {
		return cl.reduce(td, op, -1, nil)
	})
}

// Reduce combines the tensor leaves of td across every rank of the group
// with op into dst's td, in place, like tensordict's reduce. The other
// ranks' TensorDicts are only read. dst is a rank of the group; every rank
// passes the same dst. The structure check, the order and the options are
// those of AllReduce; the structure of dst is the reference its errors
// compare with.
func (td *TensorDict) Reduce(dst int, op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("Reduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *collCall) error {
		return cl.reduce(td, op, dst, cl.rootRange("dst", dst))
	})
}

// reduce runs AllReduce (root -1) or Reduce (to root). badRoot is the
// error of a root out of the group's range: this rank's failure in the
// agreement, on some ranks or all, so that no rank is left waiting for
// the others.
func (cl *collCall) reduce(td *TensorDict, op ReduceOp, root int, badRoot error) error {
	var p *leafPlan
	local := cl.ready()
	if badRoot != nil {
		local, root = badRoot, 0
	}
	if td == nil {
		local = errors.New("nil tensordict")
	} else {
		p = leafPlanOf(td).reduceLayout()
	}
	if local == nil {
		local = p.reducible(op)
	}
	if local == nil {
		local = cl.holdLeaves(p.leaves) // MPI reduces them in place
	}
	var leaves []Item
	var span []byte
	var lh uint64
	notFast := uint64(1)
	if p != nil {
		leaves, span, lh = p.leaves, p.span, p.layout
		if p.fast {
			notFast = 0
		}
	}
	// Every rank must pass the same op and root: the check compares them
	// beside the structure, as the maximum of a value and of its
	// complement, which are complements of each other only when every rank
	// gave the same value.
	r1 := uint64(root + 1)
	v, err := cl.checkSame(td, p, max(root, 0), local, lh, ^lh, notFast, uint64(op), ^uint64(op), r1, ^r1)
	if err != nil {
		return err
	}
	if v[3] != ^v[4] {
		return cl.errorf("ranks passed different ops (%v and %v): %w", ReduceOp(^v[4]), ReduceOp(v[3]), ErrMismatch)
	}
	if v[5] != ^v[6] {
		return cl.errorf("ranks passed different roots (%d and %d): %w", int(^v[6])-1, int(v[5])-1, ErrMismatch)
	}
	if cl.deferSteps {
		cl.Deferred = new(xfer.Deferred) // the agreement is over: the reduction runs on
	}
	t := reduceTarget{s: cl.Step, root: root}
	if v[2] == 0 && v[0] == ^v[1] {
		if err := t.reduceBytes(span, leaves[0].Tensor.DType(), op); err != nil {
			return cl.errorf("reducing the storage of %d leaves: %w", len(leaves), err)
		}
	} else if err := cl.reducePerLeaf(t, p, op); err != nil {
		return err
	}
	if op == ReduceAvg && (root < 0 || root == cl.rank) {
		return t.s.Then(func() error {
			for _, it := range leaves {
				if isHalf(it.Tensor.DType()) {
					continue // reduceHalf divided before the sum
				}
				if err := it.Tensor.DivScalarInPlace(float64(cl.size)); err != nil {
					return cl.errorf("key %v: averaging: %w", it.Key, err)
				}
			}
			return nil
		})
	}
	return nil
}

// checkSame is the check every rank runs before a collective that needs
// the same structure on every rank. p is td's plan (nil for a nil td);
// local is this rank's own error (nil if it is ready). extra values are
// combined with the maximum across ranks and returned. If some rank
// failed, every rank returns that rank's error
// (see agree); if the structures differ, every rank returns the same
// *StructureError, comparing with rank ref. It costs one exchange of a
// few words (xfer.Combine) when all is well.
func (cl *collCall) checkSame(td *TensorDict, p *leafPlan, ref int, local error, extra ...uint64) ([]uint64, error) {
	var sh uint64
	if td != nil {
		sh = p.hash
	}
	v := make([]uint64, 0, 4+len(extra))
	v = append(v, sh, ^sh)
	v = append(v, extra...)
	fail := uint64(0)
	if local != nil {
		fail = uint64(cl.size - cl.rank)
	}
	v = append(v, uint64(1-cl.unbounded()), fail) // MAX of bounded: MIN of unbounded
	if err := xfer.Combine(cl.Step, v, mpi.OpMax); err != nil {
		return nil, cl.errorf("comparing structures: %w", err)
	}
	cl.Agreed(int32(1 - v[len(v)-2]))
	if f := v[len(v)-1]; f != 0 {
		return nil, cl.spread(cl.size-int(f), local)
	}
	if v[0] != ^v[1] {
		var desc codec.Structure
		if td != nil {
			desc = describeStructure(td, p.leaves)
		}
		return nil, cl.explainMismatch(desc, ref)
	}
	return v[2 : 2+len(extra)], nil
}

// reduceLeaf reduces one leaf in place. A leaf that is not contiguous is
// reduced through a contiguous copy, written back where the result lands.
func (t reduceTarget) reduceLeaf(x *tensor.Tensor, op ReduceOp) error {
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
	if t.root < 0 || t.s.Comm.Rank() == t.root {
		return t.s.Then(func() error { return x.CopyFrom(tmp) })
	}
	return nil
}

// reducible returns an error naming the first leaf of p that op cannot
// reduce in place: a dtype op does not apply to, a released storage, or a
// view that repeats elements (an Expand result), which has no place to put
// distinct results. Of one leaf's faults, the first in that order is
// named.
func (p *leafPlan) reducible(op ReduceOp) error {
	first, err := len(p.leaves), error(nil)
	fault := func(i int, e error) {
		if i < first {
			first, err = i, e
		}
	}
	for _, d := range p.dtypes {
		if _, e := op.mpiOp(d.dt); e != nil {
			fault(d.first, e)
		}
	}
	for _, s := range p.storages {
		if s.st.Released() {
			fault(s.first, errors.New("storage was released"))
			continue
		}
		// MPI reduces in place, in C, where a fault (a mapped file
		// another process truncated) cannot be caught: check first. Go
		// heap memory cannot fault.
		if s.st.External() {
			if e := mem.Readable(s.st.Bytes()); e != nil {
				fault(s.first, e)
			}
		}
	}
	if p.repeats < first {
		x := p.leaves[p.repeats].Tensor
		first, err = p.repeats, fmt.Errorf("leaf of shape %v repeats elements (strides %v, an expanded view); call Contiguous first", x.Shape(), x.Strides())
	}
	if err != nil {
		return fmt.Errorf("key %v: %w", p.leaves[first].Key, err)
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
func fastSpan(leaves []Item) (span []byte, layout uint64, ok bool) {
	if len(leaves) == 0 {
		return nil, 0, false
	}
	first := leaves[0].Tensor
	dt, st := first.DType(), first.Storage()
	es := dt.Size()
	type rng struct{ off, end int }
	rs := make([]rng, len(leaves))
	for i, it := range leaves {
		x := it.Tensor
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

// ReduceOp is the element-wise operation AllReduce and Reduce combine the
// ranks' leaves with, like torch.distributed.ReduceOp.
//
// Sum and Prod apply to every dtype; Min and Max to every dtype but the
// complex ones. On bool leaves Sum and Max are a logical or, Prod and Min a
// logical and, as torch does. Float16 and BFloat16 have no MPI datatype:
// their leaves are widened to float32, reduced (for ReduceAvg, divided by
// the group's size and then summed) in float32, and rounded back to the
// nearest half value once, at the end (so a sum is at least as accurate as
// torch's, which accumulates in half precision, and a mean that fits in
// half precision is never lost to a sum that overflows).
type ReduceOp int

// The reduction operations. The zero value is ReduceSum, tensordict's
// default (op=None).
//
// ReduceAvg is the sum divided by the group's size, on floating-point and
// complex leaves only (an integer or bool leaf is refused on every rank
// before anything moves: torch's integer division would truncate, and
// tdmpi does not guess). Float16 and bfloat16 leaves are divided before
// the sum, in float32, and rounded once: the mean of 60000 and 60000 in
// float16 is 60000, not the +Inf of a sum rounded first, and that of 3e38
// and 3e38 in bfloat16 is 3e38. Other leaves are summed, then divided;
// with Reduce, only the destination divides them. ReduceBitAnd, ReduceBitOr and ReduceBitXor are bitwise on
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
		return reduceHalf(t, castBytes[tensor.F16](b), mop, op == ReduceAvg, tensor.F16.Float32, tensor.F16FromFloat32)
	case tensor.BFloat16:
		return reduceHalf(t, castBytes[tensor.BF16](b), mop, op == ReduceAvg, tensor.BF16.Float32, tensor.BF16FromFloat32)
	}
	return fmt.Errorf("dtype %v cannot be reduced", dt)
}

// reducePiece bounds the bytes of one MPI reduction. MPI's reductions
// allocate a temporary buffer of the message's size, and glibc's malloc
// maps a block of 32 MiB or more afresh on every call (its mmap
// threshold, which adapts up to 32 MiB on 64-bit machines), so that the
// buffer's pages fault in every time: on this project's VM one
// MPI_Allreduce of 256 MiB of float32 took 75-82 ms, sixteen of 16 MiB
// 17-18 ms (Open MPI at np 2; 3.5x at np 4; MPICH the same), and one of
// 32 MiB was as slow per byte as one of 256 MiB, while with glibc's
// threshold raised (MALLOC_MMAP_THRESHOLD_) every size ran fast. Pieces of
// 4-24 MiB ran at 14-19 GB/s, of 1 MiB at 13.
const reducePiece = 16 << 20

// reduceSlice reduces s in place: on every rank for Allreduce, at the root
// for Reduce (the other ranks' s is only read), in pieces of at most
// reducePiece bytes. Every rank makes the same calls: s has the same
// length on every rank.
func reduceSlice[T mpi.Scalar](t reduceTarget, s []T, op mpi.Op) error {
	n := reducePiece / int(unsafe.Sizeof(s[0]))
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
// widened, reduced as float32, and rounded back. With avg (ReduceAvg, op
// the sum), every rank divides its elements by the group's size as it
// widens them, before the sum (as NCCL's average does), so that a mean
// that fits in half precision is never lost to a sum that does not: 60000
// and 60000 in float16, whose sum overflows it, or 3e38 and 3e38 in
// bfloat16, whose sum overflows float32 too. The caller does not divide
// half leaves again.
func reduceHalf[H ~uint16](t reduceTarget, s []H, op mpi.Op, avg bool, widen func(H) float32, narrow func(float32) H) error {
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

// When the leaves cannot be reduced as one storage, small leaves are
// still not reduced one MPI call each: the leaves of one dtype smaller than
// bucketLeafMax are copied, in sorted key order, into buckets of up to
// bucketBytes, each reduced by one call and copied back. Up to a few
// hundred kilobytes, copying a leaf twice costs less than one more MPI
// collective: on this project's VM (np 2, shared memory) an MPI_Allreduce
// of 64 KiB took 20 us and one of 1 MiB 180 us, and 16 leaves of 64 KiB
// took 360-380 us one call each against 220-290 us in one bucket, 16 of 128
// KiB 580-610 against 470-490 us, 16 of 256 KiB the same either way (tdmpi
// bench, two alternating runs of builds with each limit). Larger leaves
// are reduced in place, one call each. Every rank holds the same
// structure (checked before), so every rank forms the same buckets.
const (
	bucketLeafMax = 256 << 10
	bucketBytes   = 4 << 20
)

// bucketPool keeps bucket buffers of bucketBytes between reductions, so
// that a training loop's AllReduce does not allocate.
var bucketPool = sync.Pool{New: func() any {
	b := make([]uint64, bucketBytes/8)
	return &b
}}

// A reduceStep is one MPI reduction of reducePerLeaf: one leaf in place,
// or a bucket of small leaves of one dtype, copied into a buffer of
// bytes bytes (each leaf at a multiple of 8).
type reduceStep struct {
	leaves []int // indices into the plan's leaves, in sorted key order
	bytes  int   // the bucket's size; 0 for a leaf reduced in place
	// A bucket's leaves: where each lies in the bucket and, for a
	// contiguous leaf, its bytes (nil for one copied through its tensor).
	offs  []int
	views [][]byte
}

// reduceSteps returns the steps of reducePerLeaf for leaves (in sorted key
// order): dtype by dtype, leaves of bucketLeafMax bytes and more alone,
// smaller ones in buckets of up to bucketBytes (a bucket of one leaf is
// that leaf alone); empty leaves are left out.
func reduceSteps(leaves []Item) []reduceStep {
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
				x := leaves[i].Tensor
				st.offs[j] = off
				if x.IsContiguous() {
					st.views[j], _ = x.Bytes() // nil for a released storage, which reducible refuses
				}
				off += roundUp8(x.NBytes())
			}
			steps = append(steps, st)
		}
		pending, pendingBytes = nil, 0
	}
	for _, dt := range tensor.DTypes() {
		for i, it := range leaves {
			x := it.Tensor
			if x.DType() != dt || x.Numel() == 0 {
				continue
			}
			n := x.NBytes()
			if n >= bucketLeafMax {
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

// reducePerLeaf reduces p's leaves by p.steps.
func (cl *collCall) reducePerLeaf(t reduceTarget, p *leafPlan, op ReduceOp) error {
	var buf []uint64
	defer func() {
		if cap(buf) == bucketBytes/8 {
			bucketPool.Put(&buf)
		}
	}()
	leaves := p.leaves
	for _, s := range p.steps {
		if s.bytes == 0 {
			it := leaves[s.leaves[0]]
			if err := t.reduceLeaf(it.Tensor, op); err != nil {
				return cl.errorf("key %v: %w", it.Key, err)
			}
			continue
		}
		if cap(buf) < s.bytes/8 || t.s.Deferred != nil {
			// Deferred steps: every bucket is in flight until Wait, so each
			// has its own buffer, back to the pool once copied back.
			buf = *bucketPool.Get().(*[]uint64)
		}
		own := buf
		b := wordsAsBytes(buf[:s.bytes/8])
		for j, i := range s.leaves {
			if v := s.views[j]; v != nil {
				copy(b[s.offs[j]:], v)
			} else if err := copyOut(b[s.offs[j]:], leaves[i].Tensor); err != nil {
				return cl.errorf("key %v: %w", leaves[i].Key, err)
			}
		}
		first, last := leaves[s.leaves[0]].Key, leaves[s.leaves[len(s.leaves)-1]].Key
		if err := t.reduceBytes(b, leaves[s.leaves[0]].Tensor.DType(), op); err != nil {
			return cl.errorf("keys %v to %v: %w", first, last, err)
		}
		if t.s.Deferred != nil {
			buf = nil // the deferred copy-back returns it to the pool
		}
		if err := t.s.Then(func() error {
			if t.s.Deferred != nil {
				defer bucketPool.Put(&own)
			}
			if t.root >= 0 && t.s.Comm.Rank() != t.root {
				return nil
			}
			for j, i := range s.leaves {
				if v := s.views[j]; v != nil {
					copy(v, b[s.offs[j]:])
				} else if err := copyIn(leaves[i].Tensor, b[s.offs[j]:s.offs[j]+leaves[i].Tensor.NBytes()]); err != nil {
					return cl.errorf("key %v: %w", leaves[i].Key, err)
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
	if src, err := x.Bytes(); err == nil {
		copy(b, src)
		return nil
	}
	c, err := x.Clone().Bytes()
	if err != nil {
		return err
	}
	copy(b, c)
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
