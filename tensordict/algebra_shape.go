package tensordict

import (
	"fmt"
	"math"

	"github.com/tdmpi/tdmpi/tensor"
)

// Shape operations act on the batch dimensions: every leaf, and every
// nested TensorDict, has the batch size as its leading dimensions, so an
// operation on the batch dimensions is the same operation on the leading
// dimensions of each leaf, whose feature dimensions are left alone. They
// return views wherever torch does (Split, Chunk, Squeeze, Unsqueeze,
// Permute, Transpose, Flatten, Unflatten and Reshape of contiguous leaves):
// a write through the result reaches td, and the cost is a few small
// allocations per leaf, whatever the bytes.

// withLead returns shape with its first n dimensions replaced by lead.
func withLead(lead []int, n int, shape []int) []int {
	return append(append(make([]int, 0, len(lead)+len(shape)-n), lead...), shape[n:]...)
}

// reshapeBatch rebuilds td with batch size nb (of as many elements as the
// batch size), each leaf reshaped to nb followed by its feature dimensions;
// view insists on views.
func (td *TensorDict) reshapeBatch(op string, nb []int, view bool) (*TensorDict, error) {
	bd := len(td.batch)
	return td.viewed(op, func(b []int) []int { return withLead(nb, bd, b) }, func(t *tensor.Tensor) (*tensor.Tensor, error) {
		if view && !t.IsContiguous() {
			return nil, fmt.Errorf("leaf is not contiguous (strides %v): a view is impossible; use Reshape", t.Strides())
		}
		return t.Reshape(withLead(nb, bd, t.Shape())...)
	})
}

// Reshape returns td with batch size batch, which has as many elements as
// the current one (one size may be -1, inferred), like Python's reshape:
// each leaf keeps its feature dimensions. Leaves are views when they are
// contiguous and copies otherwise.
func (td *TensorDict) Reshape(batch ...int) (*TensorDict, error) {
	nb, err := inferBatch("Reshape", td, batch)
	if err != nil {
		return nil, err
	}
	return td.reshapeBatch("Reshape", nb, false)
}

// View is Reshape that never copies: it returns an error if a leaf is not
// contiguous.
func (td *TensorDict) View(batch ...int) (*TensorDict, error) {
	nb, err := inferBatch("View", td, batch)
	if err != nil {
		return nil, err
	}
	return td.reshapeBatch("View", nb, true)
}

// inferBatch checks a new batch size for td and resolves its -1.
func inferBatch(op string, td *TensorDict, batch []int) ([]int, error) {
	nb := append([]int(nil), batch...)
	infer, known := -1, 1
	for i, d := range nb {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, fmt.Errorf("tensordict: %s: invalid batch size %v", op, batch)
		default:
			if d != 0 && known > math.MaxInt/d {
				return nil, fmt.Errorf("tensordict: %s: batch size %v overflows", op, batch)
			}
			known *= d
		}
	}
	n := td.Numel()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, fmt.Errorf("tensordict: %s: cannot infer -1 in %v for batch size %v", op, batch, td.batch)
		}
		nb[infer] = n / known
	} else if known != n {
		return nil, fmt.Errorf("tensordict: %s: batch size %v has %d elements, batch size %v has %d", op, batch, known, td.batch, n)
	}
	return nb, nil
}

// Flatten merges batch dimensions start to end (inclusive; negative ones
// count from the end of the batch dimensions) into one, like Python's
// flatten(start_dim, end_dim): GatherAndStack's [world, B] becomes
// [world*B] with Flatten(0, 1).
func (td *TensorDict) Flatten(start, end int) (*TensorDict, error) {
	s, err := td.batchDim("Flatten", start)
	if err != nil {
		return nil, err
	}
	e, err := td.batchDim("Flatten", end)
	if err != nil {
		return nil, err
	}
	if e < s {
		return nil, fmt.Errorf("tensordict: Flatten: end dimension %d comes before start dimension %d of batch size %v", end, start, td.batch)
	}
	n := 1
	for _, d := range td.batch[s : e+1] {
		n *= d
	}
	nb := append(append(append([]int(nil), td.batch[:s]...), n), td.batch[e+1:]...)
	return td.reshapeBatch("Flatten", nb, false)
}

// Unflatten splits batch dimension dim into sizes (one may be -1), like
// Python's unflatten.
func (td *TensorDict) Unflatten(dim int, sizes ...int) (*TensorDict, error) {
	d, err := td.batchDim("Unflatten", dim)
	if err != nil {
		return nil, err
	}
	part, err := inferBatch("Unflatten", New(td.batch[d]), sizes)
	if err != nil {
		return nil, err
	}
	nb := append(append(append([]int(nil), td.batch[:d]...), part...), td.batch[d+1:]...)
	return td.reshapeBatch("Unflatten", nb, false)
}

// Squeeze removes batch dimension dim if its size is 1 and returns td's
// view unchanged otherwise, like torch.squeeze(dim).
func (td *TensorDict) Squeeze(dim int) (*TensorDict, error) {
	d, err := td.batchDim("Squeeze", dim)
	if err != nil {
		return nil, err
	}
	if td.batch[d] != 1 {
		return td.viewed("Squeeze", sameBatch, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t, nil })
	}
	nb := func(b []int) []int { return append(append([]int(nil), b[:d]...), b[d+1:]...) }
	return td.viewed("Squeeze", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.Squeeze(d) })
}

// Unsqueeze inserts a batch dimension of size 1 at dim, from -(n+1) to n
// for n batch dimensions, like torch.unsqueeze.
func (td *TensorDict) Unsqueeze(dim int) (*TensorDict, error) {
	d := dim
	if d < 0 {
		d += len(td.batch) + 1
	}
	if d < 0 || d > len(td.batch) {
		return nil, fmt.Errorf("tensordict: Unsqueeze: dimension %d out of range for batch size %v", dim, td.batch)
	}
	nb := func(b []int) []int { return append(append(append([]int(nil), b[:d]...), 1), b[d:]...) }
	return td.viewed("Unsqueeze", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.Unsqueeze(d) })
}

// Permute reorders the batch dimensions: dimension i of the result is batch
// dimension dims[i] of td. dims must be a permutation of the batch
// dimensions (negative ones count from the end); feature dimensions stay
// in place.
func (td *TensorDict) Permute(dims ...int) (*TensorDict, error) {
	bd := len(td.batch)
	if len(dims) != bd {
		return nil, fmt.Errorf("tensordict: Permute: %d dimensions %v for batch size %v", len(dims), dims, td.batch)
	}
	perm := make([]int, bd)
	seen := make([]bool, bd)
	for i, dim := range dims {
		d, err := td.batchDim("Permute", dim)
		if err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, fmt.Errorf("tensordict: Permute: dimension %d repeated in %v", d, dims)
		}
		seen[d], perm[i] = true, d
	}
	nb := func(b []int) []int {
		out := append([]int(nil), b...)
		for i, d := range perm {
			out[i] = b[d]
		}
		return out
	}
	return td.viewed("Permute", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) {
		full := make([]int, t.Dim())
		for i := range full {
			full[i] = i
		}
		copy(full, perm)
		return t.Permute(full...)
	})
}

// Transpose swaps batch dimensions d0 and d1.
func (td *TensorDict) Transpose(d0, d1 int) (*TensorDict, error) {
	a, err := td.batchDim("Transpose", d0)
	if err != nil {
		return nil, err
	}
	b, err := td.batchDim("Transpose", d1)
	if err != nil {
		return nil, err
	}
	dims := make([]int, len(td.batch))
	for i := range dims {
		dims[i] = i
	}
	dims[a], dims[b] = b, a
	return td.Permute(dims...)
}

// ExpandAs returns td expanded to the batch size of o, like Expand.
func (td *TensorDict) ExpandAs(o *TensorDict) (*TensorDict, error) {
	if o == nil {
		return nil, fmt.Errorf("tensordict: ExpandAs: nil tensordict")
	}
	return td.Expand(o.batch...)
}

// Split cuts td along batch dimension dim into pieces of size entries (the
// last may be smaller), like torch.split with an int. The pieces are views.
// An empty dimension gives one empty piece.
func (td *TensorDict) Split(size, dim int) ([]*TensorDict, error) {
	d, err := td.batchDim("Split", dim)
	if err != nil {
		return nil, err
	}
	n := td.batch[d]
	if size <= 0 && !(size == 0 && n == 0) {
		return nil, fmt.Errorf("tensordict: Split: size %d must be positive", size)
	}
	if n == 0 {
		return td.SplitSizes([]int{0}, d)
	}
	sizes := make([]int, 0, (n+size-1)/size)
	for at := 0; at < n; at += size {
		sizes = append(sizes, min(size, n-at))
	}
	return td.SplitSizes(sizes, d)
}

// SplitSizes cuts td along batch dimension dim into pieces of the given
// sizes, which must add up to the dimension's size, like torch.split with a
// list. The pieces are views.
func (td *TensorDict) SplitSizes(sizes []int, dim int) ([]*TensorDict, error) {
	d, err := td.batchDim("SplitSizes", dim)
	if err != nil {
		return nil, err
	}
	total := 0
	for i, s := range sizes {
		if s < 0 || s > td.batch[d]-total {
			return nil, fmt.Errorf("tensordict: SplitSizes: sizes %v do not add up to %d (dimension %d of batch size %v): size %d at position %d", sizes, td.batch[d], d, td.batch, s, i)
		}
		total += s
	}
	if total != td.batch[d] {
		return nil, fmt.Errorf("tensordict: SplitSizes: sizes %v add up to %d, dimension %d of batch size %v is %d", sizes, total, d, td.batch, td.batch[d])
	}
	out := make([]*TensorDict, len(sizes))
	at := 0
	for i, s := range sizes {
		if out[i], err = td.Slice(d, at, at+s, 1); err != nil {
			return nil, err
		}
		at += s
	}
	return out, nil
}

// Chunk cuts td along batch dimension dim into at most n pieces of equal
// size (the last may be smaller), like torch.chunk: pieces of
// ceil(size/n) entries. The pieces are views.
func (td *TensorDict) Chunk(n, dim int) ([]*TensorDict, error) {
	if n <= 0 {
		return nil, fmt.Errorf("tensordict: Chunk: number of chunks %d must be positive", n)
	}
	d, err := td.batchDim("Chunk", dim)
	if err != nil {
		return nil, err
	}
	return td.Split((td.batch[d]+n-1)/n, d)
}

// Cat joins TensorDicts of the same structure along existing batch
// dimension dim, like torch.cat of TensorDicts: their batch sizes must agree
// except in dim and each leaf is concatenated into new contiguous storage.
// Non-tensor values that differ between the inputs are concatenated into a
// NonTensorStack (equal ones stay one value). An error wrapping
// ErrMismatch names the first key that differs in structure.
func Cat(tds []*TensorDict, dim int) (*TensorDict, error) {
	if len(tds) == 0 {
		return nil, fmt.Errorf("tensordict: Cat: no tensordicts")
	}
	if tds[0] == nil {
		return nil, fmt.Errorf("tensordict: Cat: tensordict 0 is nil")
	}
	d, err := tds[0].batchDim("Cat", dim)
	if err != nil {
		return nil, err
	}
	bd := len(tds[0].batch)
	return zip(&zipSpec{
		op: "Cat",
		batch: func(batches [][]int) ([]int, error) {
			nb := append([]int(nil), batches[0]...)
			for n, b := range batches[1:] {
				ok := len(b) == len(nb)
				for i := 0; ok && i < len(b); i++ {
					ok = i == d || b[i] == batches[0][i]
				}
				if !ok || len(b) < bd {
					return nil, fmt.Errorf("tensordict %d has batch size %v, tensordict 0 has %v (only dimension %d may differ)", n+1, b, batches[0], d)
				}
				nb[d] += b[d]
			}
			return nb, nil
		},
		leaf:      func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return mismatched(tensor.Cat(ts, d)) },
		nonTensor: catValues(d),
	}, tds)
}

// Pad returns td with its batch dimensions padded with v, like Python's
// tensordict.pad(td, pad_size, value): pads holds pairs (before, after) for
// the first batch dimension, then the second, and so on (the opposite order
// to torch's pad of a tensor); a negative pad removes entries. Every leaf is
// padded on its batch dimensions into a new tensor.
func (td *TensorDict) Pad(pads []int, v float64) (*TensorDict, error) {
	if len(pads)%2 != 0 || len(pads)/2 > len(td.batch) {
		return nil, fmt.Errorf("tensordict: Pad: %d pads %v for batch size %v: need pairs for at most %d dimensions", len(pads), pads, td.batch, len(td.batch))
	}
	before, after := make([]int, len(pads)/2), make([]int, len(pads)/2)
	nbLead := append([]int(nil), td.batch[:len(before)]...)
	for i := range before {
		before[i], after[i] = pads[2*i], pads[2*i+1]
		const limit = math.MaxInt / 4
		if before[i] < -limit || before[i] > limit || after[i] < -limit || after[i] > limit {
			return nil, fmt.Errorf("tensordict: Pad: pads (%d, %d) of dimension %d are too large", before[i], after[i], i)
		}
		if nbLead[i] += before[i] + after[i]; nbLead[i] < 0 {
			return nil, fmt.Errorf("tensordict: Pad: dimension %d of batch size %v padded by (%d, %d) has size %d", i, td.batch, before[i], after[i], nbLead[i])
		}
	}
	nb := func(b []int) []int { return withLead(nbLead, len(nbLead), b) }
	return td.indexed("Pad", nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.PadDims(before, after, v) })
}

// PadSequence stacks TensorDicts whose batch dimension dim differs in
// size, like Python's tensordict.pad_sequence: each is padded with v at the
// end of dim to the longest, and the results are stacked along a new first
// batch dimension. It also returns the bool mask of the real entries, of
// the result's batch size. The inputs must have the same structure and
// agree in their other batch dimensions.
func PadSequence(tds []*TensorDict, dim int, v float64) (_ *TensorDict, _ *tensor.Tensor, err error) {
	defer catchNoMemory(&err, "PadSequence", nil)
	if len(tds) == 0 {
		return nil, nil, fmt.Errorf("tensordict: PadSequence: no tensordicts")
	}
	longest := 0
	var ds []int
	for i, o := range tds {
		if o == nil {
			return nil, nil, fmt.Errorf("tensordict: PadSequence: tensordict %d is nil", i)
		}
		d, err := o.batchDim("PadSequence", dim)
		if err != nil {
			return nil, nil, fmt.Errorf("tensordict: PadSequence: tensordict %d: %w", i, err)
		}
		ds = append(ds, d)
		longest = max(longest, o.batch[d])
	}
	padded := make([]*TensorDict, len(tds))
	masks := make([]*tensor.Tensor, len(tds))
	for i, o := range tds {
		pads := make([]int, 2*(ds[i]+1))
		pads[2*ds[i]+1] = longest - o.batch[ds[i]]
		var err error
		if padded[i], err = o.Pad(pads, v); err != nil {
			return nil, nil, err
		}
		after := make([]int, ds[i]+1)
		after[ds[i]] = pads[2*ds[i]+1]
		if masks[i], err = tensor.Ones(tensor.Bool, o.batch...).PadDims(make([]int, len(after)), after, 0); err != nil {
			return nil, nil, err
		}
	}
	out, err := Stack(padded, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("tensordict: PadSequence: %w", err)
	}
	mask, err := tensor.Stack(masks, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("tensordict: PadSequence: %w", err)
	}
	return out, mask, nil
}
