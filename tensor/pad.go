package tensor

import (
	"fmt"
	"math"
)

// Pad returns a new tensor with t's elements surrounded by v (converted to
// t's dtype as Full converts it), like torch.nn.functional.pad in constant
// mode: pads holds pairs (before, after) for the last dimension first, then
// the one before it, and so on, for at most t.Dim() dimensions. A negative
// pad removes elements from that side. It returns an error if pads has an
// odd length or too many pairs, or a dimension would become negative.
func (t *Tensor) Pad(pads []int, v float64) (*Tensor, error) {
	if len(pads)%2 != 0 || len(pads)/2 > len(t.shape()) {
		return nil, fmt.Errorf("tensor: Pad: %d pads %v for shape %v: need pairs for at most %d dimensions", len(pads), pads, t.shape(), len(t.shape()))
	}
	before, after := make([]int, len(t.shape())), make([]int, len(t.shape()))
	for i := 0; i < len(pads); i += 2 {
		d := len(t.shape()) - 1 - i/2
		before[d], after[d] = pads[i], pads[i+1]
	}
	return t.PadDims(before, after, v)
}

// PadDims returns a new tensor with before[d] elements v put ahead of
// dimension d of t and after[d] behind it, for the leading len(before)
// dimensions (before and after have the same length, at most t.Dim()).
// Negative counts remove elements, as in Pad.
func (t *Tensor) PadDims(before, after []int, v float64) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if len(before) != len(after) || len(before) > len(t.shape()) {
		return nil, fmt.Errorf("tensor: PadDims: %d and %d pads for shape %v", len(before), len(after), t.shape())
	}
	if err := t.st.checkLive("PadDims"); err != nil {
		return nil, err
	}
	shape := cloneInts(t.shape())
	for d := range before {
		if abs(before[d]) > math.MaxInt/4 || abs(after[d]) > math.MaxInt/4 {
			return nil, fmt.Errorf("tensor: PadDims: pads (%d, %d) of dimension %d are too large", before[d], after[d], d)
		}
		n := shape[d] + before[d] + after[d]
		if n < 0 {
			return nil, fmt.Errorf("tensor: PadDims: dimension %d of shape %v padded by (%d, %d) has size %d", d, t.shape(), before[d], after[d], n)
		}
		shape[d] = int(n)
	}
	if err := checkScalar(t.dtype, v); err != nil {
		return nil, fmt.Errorf("tensor: PadDims: %w", err)
	}
	out, err := alloc("PadDims", t.dtype, shape, false)
	if err != nil {
		return nil, err
	}
	out.fillWith(v)
	src, dst := t, out
	for d := range before {
		// The part of dimension d that both keep: cropped by negative pads.
		cropLo, cropHi := max(0, -before[d]), max(0, -after[d])
		keep := t.shape()[d] - cropLo - cropHi
		if keep <= 0 {
			return out, nil
		}
		src, _ = src.Narrow(d, cropLo, keep)
		dst, _ = dst.Narrow(d, max(0, before[d]), keep)
	}
	rawCopy(dst, src)
	return out, nil
}

// abs returns |x| (for x above math.MinInt).
func abs(x int) int { return max(x, -x) }
