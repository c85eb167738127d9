package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/tensor"
)

// batchDim resolves a possibly negative batch dimension of td.
func (td *TensorDict) batchDim(op string, dim int) (int, error) {
	d := dim
	if d < 0 {
		d += len(td.batch)
	}
	if d < 0 || d >= len(td.batch) {
		return 0, fmt.Errorf("tensordict: %s: dimension %d out of range for batch size %v", op, dim, td.batch)
	}
	return d, nil
}

// indexed rebuilds td with every leaf mapped by fn and batch sizes by nb,
// wrapping errors with the key. A NonTensorStack is kept if the batch size
// is, and refused otherwise (see rebuild).
func (td *TensorDict) indexed(op string, nb func([]int) []int, fn func(*tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return guarded(op, func() (*TensorDict, error) { return td.rebuild(op, nil, nb, keyed(op, fn), false) })
}

// viewed is indexed for a layout operation fn (indexing, slicing,
// reshaping, permuting): a NonTensorStack follows it (see rebuild).
func (td *TensorDict) viewed(op string, nb func([]int) []int, fn func(*tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return guarded(op, func() (*TensorDict, error) { return td.rebuild(op, nil, nb, keyed(op, fn), true) })
}

// keyed returns fn as a leafFunc whose errors name op and the key.
func keyed(op string, fn func(*tensor.Tensor) (*tensor.Tensor, error)) leafFunc {
	return func(k Key, t *tensor.Tensor) (*tensor.Tensor, error) {
		r, err := fn(t)
		if err != nil {
			return nil, fmt.Errorf("tensordict: %s: key %v (shape %v): %w", op, k, t.Shape(), err)
		}
		return r, nil
	}
}

// Index returns td[i]: the entries at position i of the first batch
// dimension, which is removed (negative i counts from the end). Leaves are
// views, not copies.
func (td *TensorDict) Index(i int) (*TensorDict, error) {
	return td.IndexDim(0, i)
}

// IndexDim returns the entries at position i of batch dimension dim, which is
// removed, like torch.select (Index is IndexDim(0, i)). Leaves are views.
func (td *TensorDict) IndexDim(dim, i int) (*TensorDict, error) {
	d, err := td.batchDim("Index", dim)
	if err != nil {
		return nil, err
	}
	n := td.batch[d]
	if i < -n || i >= n {
		return nil, fmt.Errorf("tensordict: Index: index %d out of range for dimension %d of batch size %v", i, d, td.batch)
	}
	nb := func(b []int) []int { return append(append(make([]int, 0, len(b)-1), b[:d]...), b[d+1:]...) }
	return td.viewed("Index", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.Select(d, i) })
}

// sliceLen returns the length of Python's range(n)[start:stop:step], step > 0.
func sliceLen(n, start, stop, step int) int {
	norm := func(v int) int {
		if v < 0 {
			v += n
		}
		return min(max(v, 0), n)
	}
	start, stop = norm(start), norm(stop)
	if stop <= start {
		return 0
	}
	return (stop - start + step - 1) / step
}

// Slice returns td[..., start:stop:step, ...] along batch dimension dim, with
// Python's slice semantics (negative bounds count from the end, bounds are
// clamped; use math.MaxInt as stop for "to the end"). step must be positive.
// Leaves are views.
func (td *TensorDict) Slice(dim, start, stop, step int) (*TensorDict, error) {
	d, err := td.batchDim("Slice", dim)
	if err != nil {
		return nil, err
	}
	if step <= 0 {
		return nil, fmt.Errorf("tensordict: Slice: step %d must be positive", step)
	}
	size := sliceLen(td.batch[d], start, stop, step)
	nb := func(b []int) []int {
		out := append([]int(nil), b...)
		out[d] = size
		return out
	}
	return td.viewed("Slice", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.Slice(d, start, stop, step) })
}

// IndexSelect returns the entries at positions idx of the first batch
// dimension, in that order (indices may repeat; negative ones count from the
// end), like td[idx] with an index list. Leaves are new contiguous tensors.
func (td *TensorDict) IndexSelect(idx []int) (*TensorDict, error) {
	if len(td.batch) == 0 {
		return nil, fmt.Errorf("tensordict: IndexSelect: tensordict has no batch dimension")
	}
	n := td.batch[0]
	for _, i := range idx {
		if i < -n || i >= n {
			return nil, fmt.Errorf("tensordict: IndexSelect: index %d out of range for batch size %v", i, td.batch)
		}
	}
	nb := func(b []int) []int {
		out := append([]int(nil), b...)
		out[0] = len(idx)
		return out
	}
	return td.viewed("IndexSelect", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.IndexSelect(0, idx) })
}

// Mask returns the entries where mask is true, like td[mask] in Python: mask
// is a bool tensor whose shape equals the leading mask.Dim() batch
// dimensions; they are replaced by one dimension, the number of true
// elements. Leaves are new contiguous tensors.
func (td *TensorDict) Mask(mask *tensor.Tensor) (*TensorDict, error) {
	if mask == nil {
		return nil, fmt.Errorf("tensordict: Mask: nil mask")
	}
	ms := mask.Shape()
	if mask.DType() != tensor.Bool {
		return nil, fmt.Errorf("tensordict: Mask: mask is %v%v, want bool", mask.DType(), ms)
	}
	if len(ms) == 0 || !hasPrefix(td.batch, ms) {
		return nil, fmt.Errorf("tensordict: Mask: mask shape %v does not match the leading batch dimensions of %v", ms, td.batch)
	}
	vals, err := tensor.Data[bool](mask.Contiguous())
	if err != nil {
		return nil, fmt.Errorf("tensordict: Mask: %w", err)
	}
	count := 0
	for _, v := range vals {
		if v {
			count++
		}
	}
	md := len(ms)
	nb := func(b []int) []int { return append([]int{count}, b[md:]...) }
	return td.viewed("Mask", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.MaskSelect(mask) })
}

// Stack joins TensorDicts of the same structure and batch size along a new
// batch dimension dim (from -(n+1) to n for n batch dimensions), like
// torch.stack of TensorDicts: each leaf is stacked (new storage) and nested
// TensorDicts are stacked recursively. Non-tensor values that differ
// between the inputs are stacked into a NonTensorStack, as Python's
// torch.stack makes a NonTensorStack; equal ones stay one value. It returns
// an error wrapping ErrMismatch naming the first key that differs in
// structure (keys, kinds, batch sizes, leaf shapes).
func Stack(tds []*TensorDict, dim int) (*TensorDict, error) {
	if len(tds) == 0 {
		return nil, fmt.Errorf("tensordict: Stack: no tensordicts")
	}
	for i, o := range tds {
		if o == nil {
			return nil, fmt.Errorf("tensordict: Stack: tensordict %d is nil", i)
		}
	}
	bd := len(tds[0].batch)
	d := dim
	if d < 0 {
		d += bd + 1
	}
	if d < 0 || d > bd {
		return nil, fmt.Errorf("tensordict: Stack: dimension %d out of range for batch size %v", dim, tds[0].batch)
	}
	return zip(&zipSpec{
		op: "Stack",
		batch: func(batches [][]int) ([]int, error) {
			if _, err := sameBatches(batches); err != nil {
				return nil, err
			}
			b := batches[0]
			return append(append(append(make([]int, 0, len(b)+1), b[:d]...), len(tds)), b[d:]...), nil
		},
		leaf:      func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return mismatched(tensor.Stack(ts, d)) },
		nonTensor: stackValues(d),
	}, tds)
}

// mismatched wraps ErrMismatch around the error of stacking or
// concatenating leaves, which fails when their shapes differ: Stack's and
// Cat's structure errors all match ErrMismatch.
func mismatched(t *tensor.Tensor, err error) (*tensor.Tensor, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrMismatch)
	}
	return t, nil
}

// equalInts reports whether a and b hold the same values.
func equalInts(a, b []int) bool {
	return len(a) == len(b) && hasPrefix(a, b)
}

// Unbind splits td along batch dimension dim into td.BatchSize()[dim]
// TensorDicts with that dimension removed, like torch.unbind. Leaves are
// views. Stack(td.Unbind(dim), dim) equals td.
func (td *TensorDict) Unbind(dim int) ([]*TensorDict, error) {
	d, err := td.batchDim("Unbind", dim)
	if err != nil {
		return nil, err
	}
	out := make([]*TensorDict, td.batch[d])
	for i := range out {
		if out[i], err = td.IndexDim(d, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}
