package tensor

import "fmt"

// view returns a tensor over t's storage with the given layout (copied).
func (t *Tensor) view(shape, strides []int, offset int) *Tensor {
	return t.viewDims(joinDims(shape, strides), offset)
}

// viewDims returns a tensor over t's storage laid out by dims (a Tensor's
// dims: the shape, then the strides), which it keeps: the caller must not
// change them after.
func (t *Tensor) viewDims(dims []int, offset int) *Tensor {
	return newTensor(t.dtype, dims, offset, t.st)
}

// newDims returns the dims of a tensor of n dimensions, zeroed, and its
// shape and strides halves, for the caller to fill.
func newDims(n int) (dims, shape, strides []int) {
	dims = make([]int, 2*n)
	return dims, dims[:n:n], dims[n:]
}

// checkDim resolves a possibly negative dimension index for a tensor of nd
// dimensions, or returns an error naming op.
func checkDim(op string, dim, nd int, shape []int) (int, error) {
	d := dim
	if d < 0 {
		d += nd
	}
	if d < 0 || d >= nd {
		return 0, fmt.Errorf("tensor: %s: dimension %d out of range for shape %v", op, dim, shape)
	}
	return d, nil
}

// Select returns the view t[..., i, ...] with dimension dim removed, like
// torch.Tensor.select (t[i] for dim 0). Negative dim and i count from the end.
// It returns an error if dim or i is out of range.
func (t *Tensor) Select(dim, i int) (*Tensor, error) {
	d, err := checkDim("Select", dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	n := t.shape()[d]
	j := i
	if j < 0 {
		j += n
	}
	if j < 0 || j >= n {
		return nil, fmt.Errorf("tensor: Select: index %d out of range for dimension %d of shape %v", i, dim, t.shape())
	}
	return t.viewDims(dropDim(t, d), t.offset+j*t.strides()[d]*t.dtype.Size()), nil
}

// Narrow returns the view of t holding elements start to start+length-1 of
// dimension dim, like torch.Tensor.narrow. A negative start counts from the
// end. It returns an error if the range does not fit.
func (t *Tensor) Narrow(dim, start, length int) (*Tensor, error) {
	d, err := checkDim("Narrow", dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	n := t.shape()[d]
	s := start
	if s < 0 {
		s += n
	}
	if s < 0 || s > n || length < 0 || length > n-s {
		return nil, fmt.Errorf("tensor: Narrow: start %d length %d out of range for dimension %d of shape %v", start, length, dim, t.shape())
	}
	dims := cloneInts(t.allDims())
	dims[d] = length
	off := t.offset
	if length > 0 {
		off += s * t.strides()[d] * t.dtype.Size()
	}
	return t.viewDims(dims, off), nil
}

// Slice returns the view t[..., start:stop:step, ...] of dimension dim, with
// Python's slice semantics: negative start and stop count from the end, both
// are clamped to the dimension, and an empty range gives a dimension of size
// 0. Use math.MaxInt as stop to slice to the end. step must be positive, as in
// torch; Slice returns an error otherwise or if dim is out of range.
func (t *Tensor) Slice(dim, start, stop, step int) (*Tensor, error) {
	d, err := checkDim("Slice", dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	if step <= 0 {
		return nil, fmt.Errorf("tensor: Slice: step %d must be positive", step)
	}
	n := t.shape()[d]
	clamp := func(i int) int {
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n)
	}
	s, e := clamp(start), clamp(stop)
	length := 0
	if e > s {
		length = (e - s + step - 1) / step
	}
	dims := cloneInts(t.allDims())
	dims[d] = length
	off := t.offset
	if length > 0 {
		off += s * t.strides()[d] * t.dtype.Size()
	}
	if length > 1 {
		dims[len(t.shape())+d] *= step
	}
	return t.viewDims(dims, off), nil
}

// IndexSelect returns a new contiguous tensor of the entries idx of dimension
// dim, in that order, like torch.index_select. Negative indices count from the
// end; indices may repeat. It returns an error if dim or an index is out of
// range or t's storage was released.
func (t *Tensor) IndexSelect(dim int, idx []int) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	d, err := checkDim("IndexSelect", dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	if err := t.st.checkLive("IndexSelect"); err != nil {
		return nil, err
	}
	n := t.shape()[d]
	for k, i := range idx {
		if i < -n || i >= n {
			return nil, fmt.Errorf("tensor: IndexSelect: index %d (position %d) out of range for dimension %d of shape %v", i, k, dim, t.shape())
		}
	}
	shape := cloneInts(t.shape())
	shape[d] = len(idx)
	out := mustAlloc("IndexSelect", t.dtype, shape, true)
	for k, i := range idx {
		src, _ := t.Select(d, i)
		dst, _ := out.Select(d, k)
		rawCopy(dst, src)
	}
	return out, nil
}

// MaskSelect returns a new contiguous tensor of the entries of t where mask is
// true, like torch's t[mask]. mask is a bool tensor whose shape equals the
// leading mask.Dim() dimensions of t; the result has one leading dimension,
// the number of true elements, followed by t's remaining dimensions. It
// returns an error if mask is not bool or its shape does not match.
func (t *Tensor) MaskSelect(mask *Tensor) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if err := t.checkMask("MaskSelect", mask); err != nil {
		return nil, err
	}
	md := len(mask.shape())
	picks := t.maskOffsets(mask)
	rest := t.shape()[md:]
	out := mustAlloc("MaskSelect", t.dtype, append([]int{len(picks)}, rest...), true)
	es := t.dtype.Size()
	for k, off := range picks {
		src := t.view(rest, t.strides()[md:], t.offset+off*es)
		dst, _ := out.Select(0, k)
		rawCopy(dst, src)
	}
	return out, nil
}

// maskOffsets returns the element offsets, in t, of the sub-tensors that the
// true elements of mask (a bool tensor of t's leading shape) select, in
// row-major order of mask.
func (t *Tensor) maskOffsets(mask *Tensor) []int {
	var picks []int
	md := len(mask.shape())
	m := mask.Contiguous()
	ms := contiguousStrides(mask.shape())
	for f, on := range elems[bool](m)[:m.Numel()] {
		if !on {
			continue
		}
		off, r := 0, f
		for k := range md {
			if mask.shape()[k] > 0 {
				off += r / max(ms[k], 1) * t.strides()[k]
				r %= max(ms[k], 1)
			}
		}
		picks = append(picks, off)
	}
	return picks
}

// checkMask returns an error naming op unless mask is a bool tensor of t's
// leading shape and both storages are live.
func (t *Tensor) checkMask(op string, mask *Tensor) error {
	md := len(mask.shape())
	if mask.dtype != Bool {
		return fmt.Errorf("tensor: %s: mask is %v, need bool", op, mask.dtype)
	}
	if md > len(t.shape()) || !equalInts(mask.shape(), t.shape()[:md]) {
		return fmt.Errorf("tensor: %s: mask shape %v does not match the leading dimensions of shape %v", op, mask.shape(), t.shape())
	}
	if err := t.st.checkLive(op); err != nil {
		return err
	}
	return mask.st.checkLive(op)
}
