package tensordict

import (
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/tensor"
)

// When the leaves cannot be reduced as one storage, small leaves are
// still not reduced one MPI call each: the leaves of one dtype smaller than
// bucketLeafMax are copied, in sorted key order, into buckets of up to
// bucketBytes, each reduced by one call and copied back. For a small leaf,
// copying it twice is cheaper than the latency of one more MPI collective
// (a few microseconds; copying 64 KiB twice takes about as long). Larger
// leaves are reduced in place, one call each. Every rank holds the same
// structure (checked before), so every rank forms the same buckets.
const (
	bucketLeafMax = 64 << 10
	bucketBytes   = 4 << 20
)

// bucketPool keeps bucket buffers of bucketBytes between reductions, so
// that a training loop's AllReduce does not allocate.
var bucketPool = sync.Pool{New: func() any {
	b := make([]uint64, bucketBytes/8)
	return &b
}}

// reducePerLeaf reduces leaves (in sorted key order) leaf by leaf, with
// small leaves of one dtype grouped into buckets.
func (cl *coll) reducePerLeaf(t reduceTarget, leaves []Item, op ReduceOp) error {
	var buf []uint64
	defer func() {
		if cap(buf) == bucketBytes/8 {
			bucketPool.Put(&buf)
		}
	}()
	var pending []Item
	pendingBytes := 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		defer func() { pending, pendingBytes = pending[:0], 0 }()
		if len(pending) == 1 {
			if err := t.reduceLeaf(pending[0].Tensor, op); err != nil {
				return cl.errorf("key %v: %w", pending[0].Key, err)
			}
			return nil
		}
		if cap(buf) < pendingBytes/8 || t.s.Deferred != nil {
			// Deferred steps: every bucket is in flight until Wait, so each
			// has its own buffer, back to the pool once copied back.
			buf = *bucketPool.Get().(*[]uint64)
		}
		own := buf
		b := wordsAsBytes(buf[:pendingBytes/8])
		off := 0
		for _, it := range pending {
			n := it.Tensor.NBytes()
			if err := copyOut(b[off:off+n], it.Tensor); err != nil {
				return cl.errorf("key %v: %w", it.Key, err)
			}
			off += roundUp8(n)
		}
		dt := pending[0].Tensor.DType()
		if err := t.reduceBytes(b[:off], dt, op); err != nil {
			return cl.errorf("keys %v to %v: %w", pending[0].Key, pending[len(pending)-1].Key, err)
		}
		if t.s.Deferred != nil {
			buf = nil // the deferred copy-back returns it to the pool
		}
		items := slices.Clone(pending)
		return t.s.Then(func() error {
			if t.s.Deferred != nil {
				defer bucketPool.Put(&own)
			}
			if t.root >= 0 && t.s.Comm.Rank() != t.root {
				return nil
			}
			off := 0
			for _, it := range items {
				n := it.Tensor.NBytes()
				if err := copyIn(it.Tensor, b[off:off+n]); err != nil {
					return cl.errorf("key %v: %w", it.Key, err)
				}
				off += roundUp8(n)
			}
			return nil
		})
	}
	// Group by dtype, keeping sorted key order within each dtype.
	for _, dt := range tensor.DTypes() {
		for _, it := range leaves {
			x := it.Tensor
			if x.DType() != dt || x.Numel() == 0 {
				continue
			}
			n := x.NBytes()
			if n >= bucketLeafMax {
				if err := t.reduceLeaf(x, op); err != nil {
					return cl.errorf("key %v: %w", it.Key, err)
				}
				continue
			}
			if pendingBytes+roundUp8(n) > bucketBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			pending = append(pending, it)
			pendingBytes += roundUp8(n)
		}
		if err := flush(); err != nil {
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
