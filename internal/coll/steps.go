// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

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
}

// PlanReduction returns the reduction of leaves, given in the order every
// rank takes them (tensordict's sorted key order); key(i) names leaf i in
// errors. It reads the leaves' bytes (tensor.Storage.Bytes).
func PlanReduction(leaves []*tensor.Tensor, key func(i int) any) *Reduction {
	r := &Reduction{leaves: leaves, key: key, steps: planSteps(leaves)}
	r.span, r.layout, r.fast = fastSpan(leaves)
	return r
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
