package tensor

import "fmt"

// Unsqueeze returns a view of t with a new dimension of size 1 at position
// dim, which may be from -(n+1) to n, like torch.unsqueeze.
func (t *Tensor) Unsqueeze(dim int) (*Tensor, error) {
	d, err := checkDim("Unsqueeze", dim, len(t.shape())+1, t.shape())
	if err != nil {
		return nil, err
	}
	stride := 1
	if d < len(t.shape()) {
		stride = t.strides()[d] * t.shape()[d]
	}
	dims, shape, strides := newDims(len(t.shape()) + 1)
	copy(shape, t.shape()[:d])
	copy(shape[d+1:], t.shape()[d:])
	copy(strides, t.strides()[:d])
	copy(strides[d+1:], t.strides()[d:])
	shape[d], strides[d] = 1, stride
	return t.viewDims(dims, t.offset), nil
}

// Squeeze returns a view of t without dimension dim if its size is 1, and t's
// view unchanged otherwise, like torch.squeeze(t, dim).
func (t *Tensor) Squeeze(dim int) (*Tensor, error) {
	d, err := checkDim("Squeeze", dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	if t.shape()[d] != 1 {
		return t.viewDims(t.allDims(), t.offset), nil
	}
	return t.viewDims(dropDim(t, d), t.offset), nil
}

// dropDim returns the dims of t without dimension d.
func dropDim(t *Tensor, d int) []int {
	dims, shape, strides := newDims(len(t.shape()) - 1)
	copy(shape, t.shape()[:d])
	copy(shape[d:], t.shape()[d+1:])
	copy(strides, t.strides()[:d])
	copy(strides[d:], t.strides()[d+1:])
	return dims
}

// Permute returns a view of t with its dimensions reordered: dimension i of
// the result is dimension dims[i] of t, like torch.permute. It returns an
// error unless dims is a permutation of t's dimensions.
func (t *Tensor) Permute(dims ...int) (*Tensor, error) {
	nd := len(t.shape())
	if len(dims) != nd {
		return nil, fmt.Errorf("tensor: Permute: %d dimensions %v for shape %v", len(dims), dims, t.shape())
	}
	seen := make([]bool, nd)
	out, shape, strides := newDims(nd)
	for i, dim := range dims {
		d, err := checkDim("Permute", dim, nd, t.shape())
		if err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, fmt.Errorf("tensor: Permute: dimension %d repeated in %v", d, dims)
		}
		seen[d] = true
		shape[i], strides[i] = t.shape()[d], t.strides()[d]
	}
	return t.viewDims(out, t.offset), nil
}

// Transpose returns a view of t with dimensions d0 and d1 swapped, like
// torch.transpose.
func (t *Tensor) Transpose(d0, d1 int) (*Tensor, error) {
	dims := make([]int, len(t.shape()))
	for i := range dims {
		dims[i] = i
	}
	a, err := checkDim("Transpose", d0, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	b, err := checkDim("Transpose", d1, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	dims[a], dims[b] = b, a
	return t.Permute(dims...)
}
