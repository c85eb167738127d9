package tensor

import (
	"fmt"
	"math"
)

// view returns a tensor over t's storage with the given layout.
func (t *Tensor) view(shape, strides []int, offset int) *Tensor {
	return &Tensor{dtype: t.dtype, shape: shape, strides: strides, offset: offset, st: t.st}
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
	d, err := checkDim("Select", dim, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	n := t.shape[d]
	j := i
	if j < 0 {
		j += n
	}
	if j < 0 || j >= n {
		return nil, fmt.Errorf("tensor: Select: index %d out of range for dimension %d of shape %v", i, dim, t.shape)
	}
	shape := append(cloneInts(t.shape[:d]), t.shape[d+1:]...)
	strides := append(cloneInts(t.strides[:d]), t.strides[d+1:]...)
	return t.view(shape, strides, t.offset+j*t.strides[d]*t.dtype.Size()), nil
}

// Narrow returns the view of t holding elements start to start+length-1 of
// dimension dim, like torch.Tensor.narrow. A negative start counts from the
// end. It returns an error if the range does not fit.
func (t *Tensor) Narrow(dim, start, length int) (*Tensor, error) {
	d, err := checkDim("Narrow", dim, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	n := t.shape[d]
	s := start
	if s < 0 {
		s += n
	}
	if s < 0 || s > n || length < 0 || length > n-s {
		return nil, fmt.Errorf("tensor: Narrow: start %d length %d out of range for dimension %d of shape %v", start, length, dim, t.shape)
	}
	shape := cloneInts(t.shape)
	shape[d] = length
	off := t.offset
	if length > 0 {
		off += s * t.strides[d] * t.dtype.Size()
	}
	return t.view(shape, cloneInts(t.strides), off), nil
}

// Slice returns the view t[..., start:stop:step, ...] of dimension dim, with
// Python's slice semantics: negative start and stop count from the end, both
// are clamped to the dimension, and an empty range gives a dimension of size
// 0. Use math.MaxInt as stop to slice to the end. step must be positive, as in
// torch; Slice returns an error otherwise or if dim is out of range.
func (t *Tensor) Slice(dim, start, stop, step int) (*Tensor, error) {
	d, err := checkDim("Slice", dim, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	if step <= 0 {
		return nil, fmt.Errorf("tensor: Slice: step %d must be positive", step)
	}
	n := t.shape[d]
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
	shape, strides := cloneInts(t.shape), cloneInts(t.strides)
	shape[d] = length
	off := t.offset
	if length > 0 {
		off += s * t.strides[d] * t.dtype.Size()
	}
	if length > 1 {
		strides[d] *= step
	}
	return t.view(shape, strides, off), nil
}

// IndexSelect returns a new contiguous tensor of the entries idx of dimension
// dim, in that order, like torch.index_select. Negative indices count from the
// end; indices may repeat. It returns an error if dim or an index is out of
// range or t's storage was released.
func (t *Tensor) IndexSelect(dim int, idx []int) (*Tensor, error) {
	d, err := checkDim("IndexSelect", dim, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	if err := t.st.checkLive("IndexSelect"); err != nil {
		return nil, err
	}
	n := t.shape[d]
	for k, i := range idx {
		if i < -n || i >= n {
			return nil, fmt.Errorf("tensor: IndexSelect: index %d (position %d) out of range for dimension %d of shape %v", i, k, dim, t.shape)
		}
	}
	shape := cloneInts(t.shape)
	shape[d] = len(idx)
	out := Empty(t.dtype, shape...)
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
func (t *Tensor) MaskSelect(mask *Tensor) (*Tensor, error) {
	md := len(mask.shape)
	if mask.dtype != Bool {
		return nil, fmt.Errorf("tensor: MaskSelect: mask is %v, need bool", mask.dtype)
	}
	if md > len(t.shape) || !equalInts(mask.shape, t.shape[:md]) {
		return nil, fmt.Errorf("tensor: MaskSelect: mask shape %v does not match the leading dimensions of shape %v", mask.shape, t.shape)
	}
	if err := t.st.checkLive("MaskSelect"); err != nil {
		return nil, err
	}
	if err := mask.st.checkLive("MaskSelect"); err != nil {
		return nil, err
	}
	// Element offsets, in t, of the selected sub-tensors.
	var picks []int
	m := mask.Contiguous()
	ms := contiguousStrides(mask.shape)
	for f, on := range elems[bool](m)[:m.Numel()] {
		if !on {
			continue
		}
		off, r := 0, f
		for k := range md {
			if mask.shape[k] > 0 {
				off += r / max(ms[k], 1) * t.strides[k]
				r %= max(ms[k], 1)
			}
		}
		picks = append(picks, off)
	}
	rest := t.shape[md:]
	out := Empty(t.dtype, append([]int{len(picks)}, rest...)...)
	es := t.dtype.Size()
	for k, off := range picks {
		src := t.view(cloneInts(rest), cloneInts(t.strides[md:]), t.offset+off*es)
		dst, _ := out.Select(0, k)
		rawCopy(dst, src)
	}
	return out, nil
}

// Stack joins tensors of one dtype and shape along a new dimension dim, like
// torch.stack; dim may be from -(n+1) to n for n-dimensional inputs. The
// result is new contiguous storage. It returns an error if ts is empty, the
// dtypes or shapes differ, dim is out of range or a storage was released.
func Stack(ts []*Tensor, dim int) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("tensor: Stack: no tensors")
	}
	first := ts[0]
	nd := len(first.shape)
	d, err := checkDim("Stack", dim, nd+1, first.shape)
	if err != nil {
		return nil, err
	}
	for k, x := range ts {
		if x.dtype != first.dtype || !equalInts(x.shape, first.shape) {
			return nil, fmt.Errorf("tensor: Stack: tensor %d is %v%v, tensor 0 is %v%v", k, x.dtype, x.shape, first.dtype, first.shape)
		}
		if err := x.st.checkLive("Stack"); err != nil {
			return nil, err
		}
	}
	shape := append(append(cloneInts(first.shape[:d]), len(ts)), first.shape[d:]...)
	out := Empty(first.dtype, shape...)
	for k, x := range ts {
		dst, _ := out.Select(d, k)
		rawCopy(dst, x)
	}
	return out, nil
}

// Cat joins tensors of one dtype along the existing dimension dim, like
// torch.cat; their other dimensions must agree. The result is new contiguous
// storage. It returns an error if ts is empty, the dtypes or shapes disagree,
// dim is out of range or a storage was released.
func Cat(ts []*Tensor, dim int) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("tensor: Cat: no tensors")
	}
	first := ts[0]
	d, err := checkDim("Cat", dim, len(first.shape), first.shape)
	if err != nil {
		return nil, err
	}
	total := 0
	for k, x := range ts {
		ok := x.dtype == first.dtype && len(x.shape) == len(first.shape)
		for i := 0; ok && i < len(x.shape); i++ {
			ok = i == d || x.shape[i] == first.shape[i]
		}
		if !ok {
			return nil, fmt.Errorf("tensor: Cat: tensor %d is %v%v, tensor 0 is %v%v (only dimension %d may differ)", k, x.dtype, x.shape, first.dtype, first.shape, d)
		}
		if err := x.st.checkLive("Cat"); err != nil {
			return nil, err
		}
		if total > math.MaxInt-x.shape[d] {
			return nil, fmt.Errorf("tensor: Cat: joined dimension overflows")
		}
		total += x.shape[d]
	}
	shape := cloneInts(first.shape)
	shape[d] = total
	out := Empty(first.dtype, shape...)
	at := 0
	for _, x := range ts {
		dst, _ := out.Narrow(d, at, x.shape[d])
		rawCopy(dst, x)
		at += x.shape[d]
	}
	return out, nil
}

// Unbind returns the views t.Select(dim, i) for every i, like torch.unbind.
// It returns an error if dim is out of range.
func (t *Tensor) Unbind(dim int) ([]*Tensor, error) {
	d, err := checkDim("Unbind", dim, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	out := make([]*Tensor, t.shape[d])
	for i := range out {
		out[i], _ = t.Select(d, i)
	}
	return out, nil
}

// Unsqueeze returns a view of t with a new dimension of size 1 at position
// dim, which may be from -(n+1) to n, like torch.unsqueeze.
func (t *Tensor) Unsqueeze(dim int) (*Tensor, error) {
	d, err := checkDim("Unsqueeze", dim, len(t.shape)+1, t.shape)
	if err != nil {
		return nil, err
	}
	stride := 1
	if d < len(t.shape) {
		stride = t.strides[d] * t.shape[d]
	}
	shape := append(append(cloneInts(t.shape[:d]), 1), t.shape[d:]...)
	strides := append(append(cloneInts(t.strides[:d]), stride), t.strides[d:]...)
	return t.view(shape, strides, t.offset), nil
}

// Squeeze returns a view of t without dimension dim if its size is 1, and t's
// view unchanged otherwise, like torch.squeeze(t, dim).
func (t *Tensor) Squeeze(dim int) (*Tensor, error) {
	d, err := checkDim("Squeeze", dim, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	if t.shape[d] != 1 {
		return t.view(cloneInts(t.shape), cloneInts(t.strides), t.offset), nil
	}
	shape := append(cloneInts(t.shape[:d]), t.shape[d+1:]...)
	strides := append(cloneInts(t.strides[:d]), t.strides[d+1:]...)
	return t.view(shape, strides, t.offset), nil
}

// Permute returns a view of t with its dimensions reordered: dimension i of
// the result is dimension dims[i] of t, like torch.permute. It returns an
// error unless dims is a permutation of t's dimensions.
func (t *Tensor) Permute(dims ...int) (*Tensor, error) {
	nd := len(t.shape)
	if len(dims) != nd {
		return nil, fmt.Errorf("tensor: Permute: %d dimensions %v for shape %v", len(dims), dims, t.shape)
	}
	seen := make([]bool, nd)
	shape, strides := make([]int, nd), make([]int, nd)
	for i, dim := range dims {
		d, err := checkDim("Permute", dim, nd, t.shape)
		if err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, fmt.Errorf("tensor: Permute: dimension %d repeated in %v", d, dims)
		}
		seen[d] = true
		shape[i], strides[i] = t.shape[d], t.strides[d]
	}
	return t.view(shape, strides, t.offset), nil
}

// Transpose returns a view of t with dimensions d0 and d1 swapped, like
// torch.transpose.
func (t *Tensor) Transpose(d0, d1 int) (*Tensor, error) {
	dims := make([]int, len(t.shape))
	for i := range dims {
		dims[i] = i
	}
	a, err := checkDim("Transpose", d0, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	b, err := checkDim("Transpose", d1, len(t.shape), t.shape)
	if err != nil {
		return nil, err
	}
	dims[a], dims[b] = b, a
	return t.Permute(dims...)
}
