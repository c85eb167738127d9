package tensor

import "fmt"

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
