package tensordict

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

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
// within a dtype: leaves of 64 KiB and more are reduced in place one call
// each, smaller ones are copied into buckets of up to 4 MiB, one call per
// bucket. Either way every rank makes the same calls, whatever its
// insertion order. Leaves that are not contiguous are reduced through a
// copy and written back; a leaf that repeats elements (an Expand result)
// is refused. Nested TensorDicts use the same group (Python tensordict's
// reduce falls back to the default group there).
//
// See ReduceOp for the dtypes each operation accepts. Options: WithGroup,
// WithContext (checked before the reduction starts; MPI cannot cancel it
// once under way).
func (td *TensorDict) AllReduce(op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("AllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *coll) error {
		return cl.reduce(td, op, -1)
	})
}

// Reduce combines the tensor leaves of td across every rank of the group
// with op into dst's td, in place, like tensordict's reduce. The other
// ranks' TensorDicts are only read. dst is a rank of the group; every rank
// passes the same dst. The structure check, the order and the options are
// those of AllReduce; the structure of dst is the reference its errors
// compare with.
func (td *TensorDict) Reduce(dst int, op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("Reduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *coll) error {
		if err := cl.checkRoot("dst", dst); err != nil {
			return err
		}
		return cl.reduce(td, op, dst)
	})
}

// reduce runs AllReduce (root < 0) or Reduce (to root).
func (cl *coll) reduce(td *TensorDict, op ReduceOp, root int) error {
	var leaves []Item
	local := cl.ready()
	if td == nil {
		local = errors.New("nil tensordict")
	} else {
		leaves = sortedLeaves(td)
	}
	if local == nil {
		local = checkReducible(leaves, op)
	}
	span, lh, fast := fastSpan(leaves)
	notFast := uint64(0)
	if !fast {
		notFast = 1
	}
	// Every rank must pass the same op and root: the check compares them
	// beside the structure, as the maximum of a value and of its
	// complement, which are complements of each other only when every rank
	// gave the same value.
	r1 := uint64(root + 1)
	v, err := cl.checkSame(td, leaves, max(root, 0), local, lh, ^lh, notFast, uint64(op), ^uint64(op), r1, ^r1)
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
	} else if err := cl.reducePerLeaf(t, leaves, op); err != nil {
		return err
	}
	if op == ReduceAvg && (root < 0 || root == cl.rank) {
		return t.s.Then(func() error {
			for _, it := range leaves {
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
// the same structure on every rank. local is this rank's own error (nil if
// it is ready). extra values are combined with the maximum across ranks
// and returned. If some rank failed, every rank returns that rank's error
// (see agree); if the structures differ, every rank returns the same
// *StructureError, comparing with rank ref. It costs one MPI_Allreduce of a
// few words when all is well.
func (cl *coll) checkSame(td *TensorDict, leaves []Item, ref int, local error, extra ...uint64) ([]uint64, error) {
	var sh uint64
	if td != nil {
		sh = structureHash(td, leaves)
	}
	v := make([]uint64, 0, 4+len(extra))
	v = append(v, sh, ^sh)
	v = append(v, extra...)
	fail := uint64(0)
	if local != nil {
		fail = uint64(cl.size - cl.rank)
	}
	v = append(v, uint64(1-cl.unbounded()), fail) // MAX of bounded: MIN of unbounded
	if err := xfer.Allreduce(cl.Step, v, mpi.OpMax); err != nil {
		return nil, cl.errorf("comparing structures: %w", err)
	}
	cl.Agreed(int32(1 - v[len(v)-2]))
	if f := v[len(v)-1]; f != 0 {
		return nil, cl.spread(cl.size-int(f), local)
	}
	if v[0] != ^v[1] {
		var desc codec.Structure
		if td != nil {
			desc = describeStructure(td, leaves)
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

// checkReducible returns an error naming the first leaf that op cannot
// reduce in place: a dtype op does not apply to, a released storage, or a
// view that repeats elements (an Expand result), which has no place to put
// distinct results.
func checkReducible(leaves []Item, op ReduceOp) error {
	for _, it := range leaves {
		x := it.Tensor
		if _, err := op.mpiOp(x.DType()); err != nil {
			return fmt.Errorf("key %v: %w", it.Key, err)
		}
		if x.Storage().Released() {
			return fmt.Errorf("key %v: storage was released", it.Key)
		}
		// MPI reduces in place, in C, where a fault (a mapped file
		// another process truncated) cannot be caught: check first.
		if err := mem.Readable(x.Storage().Bytes()); err != nil {
			return fmt.Errorf("key %v: %w", it.Key, err)
		}
		if x.Numel() > 1 {
			shape, strides := x.Shape(), x.Strides()
			for i := range shape {
				if shape[i] > 1 && strides[i] == 0 {
					return fmt.Errorf("key %v: leaf of shape %v repeats elements (strides %v, an expanded view); call Contiguous first", it.Key, shape, strides)
				}
			}
		}
	}
	return nil
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
