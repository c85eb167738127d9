package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/tensor"
)

// Element-wise arithmetic between TensorDicts pairs their leaves key by
// key: both must have the same keys at every level (in any order) and the
// same batch sizes, and an error names the first key that differs. Leaves
// broadcast, promote and compute as the tensor package's operations do
// (integers exact, float16 and bfloat16 in float32). Non-tensor values are
// kept from td. The in-place forms check the whole structure before they
// write anything; they write into td's leaves (keeping their storage, so a
// consolidated or memory-mapped TensorDict stays so) and refuse a result
// that does not fit a leaf's dtype.

// Add returns td + o, leaf by leaf.
func (td *TensorDict) Add(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Add", o, (*tensor.Tensor).Add)
}

// Sub returns td - o, leaf by leaf, like Add.
func (td *TensorDict) Sub(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Sub", o, (*tensor.Tensor).Sub)
}

// Mul returns td * o, leaf by leaf, like Add.
func (td *TensorDict) Mul(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Mul", o, (*tensor.Tensor).Mul)
}

// Div returns td / o (true division), leaf by leaf, like Add.
func (td *TensorDict) Div(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Div", o, (*tensor.Tensor).Div)
}

// Pow returns td raised to the power o, leaf by leaf, like Add.
func (td *TensorDict) Pow(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Pow", o, (*tensor.Tensor).Pow)
}

// AddInPlace sets td to td + o, leaf by leaf, in place (Python's add_).
func (td *TensorDict) AddInPlace(o *TensorDict) error {
	return td.zip2InPlace("AddInPlace", o, (*tensor.Tensor).AddInPlace)
}

// SubInPlace sets td to td - o, like AddInPlace.
func (td *TensorDict) SubInPlace(o *TensorDict) error {
	return td.zip2InPlace("SubInPlace", o, (*tensor.Tensor).SubInPlace)
}

// MulInPlace sets td to td * o, like AddInPlace.
func (td *TensorDict) MulInPlace(o *TensorDict) error {
	return td.zip2InPlace("MulInPlace", o, (*tensor.Tensor).MulInPlace)
}

// DivInPlace sets td to td / o, like AddInPlace; leaves must be floating
// or complex.
func (td *TensorDict) DivInPlace(o *TensorDict) error {
	return td.zip2InPlace("DivInPlace", o, (*tensor.Tensor).DivInPlace)
}

// PowInPlace sets td to td raised to the power o, like AddInPlace.
func (td *TensorDict) PowInPlace(o *TensorDict) error {
	return td.zip2InPlace("PowInPlace", o, (*tensor.Tensor).PowInPlace)
}

// CopyFrom copies o's leaves into td's, in place (Python's copy_ and
// update_ of every key): o must have td's keys; each of its leaves
// broadcasts to td's leaf and is converted to its dtype.
func (td *TensorDict) CopyFrom(o *TensorDict) error {
	return td.zip2InPlace("CopyFrom", o, (*tensor.Tensor).CopyFrom)
}

// AddScalar returns td + v, leaf by leaf, with the tensor package's scalar
// dtype rule (see tensor.Tensor.AddScalar).
func (td *TensorDict) AddScalar(v float64) *TensorDict {
	return td.mustRebuild("AddScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.AddScalar(v) })
}

// SubScalar returns td - v, leaf by leaf, like AddScalar.
func (td *TensorDict) SubScalar(v float64) *TensorDict {
	return td.mustRebuild("SubScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.SubScalar(v) })
}

// MulScalar returns td * v, leaf by leaf, like AddScalar.
func (td *TensorDict) MulScalar(v float64) *TensorDict {
	return td.mustRebuild("MulScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.MulScalar(v) })
}

// DivScalar returns td / v, leaf by leaf, like AddScalar (bool and integer
// leaves give float32).
func (td *TensorDict) DivScalar(v float64) *TensorDict {
	return td.mustRebuild("DivScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.DivScalar(v) })
}

// AddScalarInPlace adds v to every leaf in place (Python's add_ with a
// number). An integer leaf takes only an integral v. On an error, the
// leaves before the one named have been written.
func (td *TensorDict) AddScalarInPlace(v float64) error {
	return td.eachLeaf("AddScalarInPlace", func(t *tensor.Tensor) error { return t.AddScalarInPlace(v) })
}

// SubScalarInPlace subtracts v from every leaf in place, like
// AddScalarInPlace.
func (td *TensorDict) SubScalarInPlace(v float64) error {
	return td.eachLeaf("SubScalarInPlace", func(t *tensor.Tensor) error { return t.SubScalarInPlace(v) })
}

// MulScalarInPlace multiplies every leaf by v in place, like
// AddScalarInPlace.
func (td *TensorDict) MulScalarInPlace(v float64) error {
	return td.eachLeaf("MulScalarInPlace", func(t *tensor.Tensor) error { return t.MulScalarInPlace(v) })
}

// DivScalarInPlace divides every leaf by v in place, like
// AddScalarInPlace; every leaf must be floating or complex. This is how a
// data-parallel loop averages after AllReduce without losing the
// consolidated receive buffer: grads.DivScalarInPlace(float64(size)).
func (td *TensorDict) DivScalarInPlace(v float64) error {
	return td.eachLeaf("DivScalarInPlace", func(t *tensor.Tensor) error { return t.DivScalarInPlace(v) })
}

// PowScalar returns td raised to the power v, leaf by leaf.
func (td *TensorDict) PowScalar(v float64) (*TensorDict, error) {
	return td.mapLeaves("PowScalar", func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.PowScalar(v) })
}

// PowScalarInPlace raises every leaf to the power v in place.
func (td *TensorDict) PowScalarInPlace(v float64) error {
	return td.eachLeaf("PowScalarInPlace", func(t *tensor.Tensor) error { return t.PowScalarInPlace(v) })
}

// Neg returns -td, leaf by leaf; a bool leaf is an error.
func (td *TensorDict) Neg() (*TensorDict, error) {
	return td.mapLeaves("Neg", (*tensor.Tensor).Neg)
}

// NegInPlace negates every leaf in place.
func (td *TensorDict) NegInPlace() error {
	return td.eachLeaf("NegInPlace", (*tensor.Tensor).NegInPlace)
}

// Abs returns |td|, leaf by leaf (complex leaves give their real modulus).
func (td *TensorDict) Abs() (*TensorDict, error) {
	return td.mapLeaves("Abs", (*tensor.Tensor).Abs)
}

// AbsInPlace sets every leaf to its absolute value in place.
func (td *TensorDict) AbsInPlace() error {
	return td.eachLeaf("AbsInPlace", (*tensor.Tensor).AbsInPlace)
}

// Clamp returns td with every element limited to [lo, hi] (see
// tensor.Tensor.Clamp; infinite bounds are no bound).
func (td *TensorDict) Clamp(lo, hi float64) (*TensorDict, error) {
	return td.mapLeaves("Clamp", func(t *tensor.Tensor) (*tensor.Tensor, error) { return t.Clamp(lo, hi) })
}

// ClampInPlace limits every element to [lo, hi] in place.
func (td *TensorDict) ClampInPlace(lo, hi float64) error {
	return td.eachLeaf("ClampInPlace", func(t *tensor.Tensor) error { return t.ClampInPlace(lo, hi) })
}

// Lerp returns td + w*(end - td), leaf by leaf, like Python's lerp with a
// scalar weight; leaves must be floating or complex.
func (td *TensorDict) Lerp(end *TensorDict, w float64) (*TensorDict, error) {
	return td.zip2("Lerp", end, func(a, b *tensor.Tensor) (*tensor.Tensor, error) { return a.LerpScalar(b, w) })
}

// LerpInPlace sets td to Lerp(end, w) in place.
func (td *TensorDict) LerpInPlace(end *TensorDict, w float64) error {
	wt := tensor.Full(tensor.Float64, w)
	return td.zip2InPlace("LerpInPlace", end, func(a, b *tensor.Tensor) error {
		return a.LerpInPlace(b, wt.To(a.DType()))
	})
}

// Zero sets every leaf to zero in place (Python's zero_).
func (td *TensorDict) Zero() error { return td.eachLeaf("Zero", (*tensor.Tensor).Zero) }

// Fill sets every element of every leaf to v in place, converted to each
// leaf's dtype.
func (td *TensorDict) Fill(v float64) error {
	return td.eachLeaf("Fill", func(t *tensor.Tensor) error { return t.Fill(v) })
}

// Lt returns the bool TensorDict of td < o, leaf by leaf, like Add pairs
// leaves; non-tensor values are kept from td.
func (td *TensorDict) Lt(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Lt", o, (*tensor.Tensor).Lt)
}

// Le returns td <= o, like Lt.
func (td *TensorDict) Le(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Le", o, (*tensor.Tensor).Le)
}

// Gt returns td > o, like Lt.
func (td *TensorDict) Gt(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Gt", o, (*tensor.Tensor).Gt)
}

// Ge returns td >= o, like Lt.
func (td *TensorDict) Ge(o *TensorDict) (*TensorDict, error) {
	return td.zip2("Ge", o, (*tensor.Tensor).Ge)
}

// LtScalar returns the bool TensorDict of td < v, leaf by leaf; non-tensor
// values are kept as they are.
func (td *TensorDict) LtScalar(v float64) *TensorDict {
	return td.mustRebuild("LtScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.LtScalar(v) })
}

// LeScalar returns td <= v, like LtScalar.
func (td *TensorDict) LeScalar(v float64) *TensorDict {
	return td.mustRebuild("LeScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.LeScalar(v) })
}

// GtScalar returns td > v, like LtScalar.
func (td *TensorDict) GtScalar(v float64) *TensorDict {
	return td.mustRebuild("GtScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.GtScalar(v) })
}

// GeScalar returns td >= v, like LtScalar.
func (td *TensorDict) GeScalar(v float64) *TensorDict {
	return td.mustRebuild("GeScalar", func(t *tensor.Tensor) *tensor.Tensor { return t.GeScalar(v) })
}

// IsClose returns the bool TensorDict of |td - o| <= atol + rtol*|o|, leaf
// by leaf (see tensor.Tensor.IsClose).
func (td *TensorDict) IsClose(o *TensorDict, rtol, atol float64, equalNaN bool) (*TensorDict, error) {
	return td.zip2("IsClose", o, func(a, b *tensor.Tensor) (*tensor.Tensor, error) {
		return a.IsClose(b, rtol, atol, equalNaN)
	})
}

// AllClose reports whether every leaf of td is close to o's (IsClose with
// equalNaN false, like torch.allclose of every leaf).
func (td *TensorDict) AllClose(o *TensorDict, rtol, atol float64) (bool, error) {
	c, err := td.IsClose(o, rtol, atol, false)
	if err != nil {
		return false, err
	}
	return c.All(), nil
}

// batchMask returns mask, a tensor of td's leading batch shape, reshaped to
// broadcast against leaf t from the left, as tensordict aligns masks with
// batch dimensions: trailing size-1 dimensions for t's other dimensions.
func batchMask(op string, mask, t *tensor.Tensor) (*tensor.Tensor, error) {
	ms := mask.Shape()
	if ts := t.Shape(); !hasPrefix(ts, ms) {
		return nil, fmt.Errorf("tensordict: %s: mask shape %v is not a prefix of leaf shape %v", op, ms, ts)
	}
	for len(ms) < t.Dim() {
		ms = append(ms, 1)
	}
	return mask.Reshape(ms...)
}

// Where returns, leaf by leaf, td's elements where cond is true and
// other's elsewhere, like Python's td.where(condition, other): cond is a
// bool tensor whose shape is a prefix of the batch size (it applies to every
// feature of a leaf), other has td's structure.
func (td *TensorDict) Where(cond *tensor.Tensor, other *TensorDict) (*TensorDict, error) {
	if cond == nil {
		return nil, fmt.Errorf("tensordict: Where: nil condition")
	}
	return td.zip2("Where", other, func(a, b *tensor.Tensor) (*tensor.Tensor, error) {
		c, err := batchMask("Where", cond, a)
		if err != nil {
			return nil, err
		}
		return tensor.Where(c, a, b)
	})
}

// MaskedFill returns td with v wherever mask is true, leaf by leaf, like
// Python's masked_fill: mask is a bool tensor whose shape is a prefix of
// the batch size.
func (td *TensorDict) MaskedFill(mask *tensor.Tensor, v float64) (*TensorDict, error) {
	if mask == nil {
		return nil, fmt.Errorf("tensordict: MaskedFill: nil mask")
	}
	return td.mapLeaves("MaskedFill", func(t *tensor.Tensor) (*tensor.Tensor, error) {
		m, err := batchMask("MaskedFill", mask, t)
		if err != nil {
			return nil, err
		}
		return t.MaskedFill(m, v)
	})
}

// MaskedFillInPlace sets every leaf's elements to v wherever mask is true,
// in place (Python's masked_fill_).
func (td *TensorDict) MaskedFillInPlace(mask *tensor.Tensor, v float64) error {
	if mask == nil {
		return fmt.Errorf("tensordict: MaskedFillInPlace: nil mask")
	}
	return td.eachLeaf("MaskedFillInPlace", func(t *tensor.Tensor) error {
		m, err := batchMask("MaskedFillInPlace", mask, t)
		if err != nil {
			return err
		}
		return t.MaskedFillInPlace(m, v)
	})
}

// Reductions follow Python tensordict: with no dims, every leaf is reduced
// over all its elements (batch and feature dimensions) and the result has
// an empty batch size; with dims, those batch dimensions (negative ones
// count from the end of the batch dimensions) are reduced in every leaf
// and removed from the batch size. Result dtypes are torch's (see the
// tensor package: sum and prod of integers give int64, mean, std and var
// need floating leaves). Non-tensor values are kept.

// reduceBatch rebuilds td with fn(t, dims) for every leaf, where dims are
// the resolved batch dimensions, or nil for all of a leaf's dimensions.
func (td *TensorDict) reduceBatch(op string, dims []int, fn func(t *tensor.Tensor, dims []int) (*tensor.Tensor, error)) (*TensorDict, error) {
	if len(dims) == 0 {
		return td.indexed(op, func([]int) []int { return []int{} }, func(t *tensor.Tensor) (*tensor.Tensor, error) { return fn(t, nil) })
	}
	drop := make([]bool, len(td.batch))
	res := make([]int, len(dims))
	for i, dim := range dims {
		d, err := td.batchDim(op, dim)
		if err != nil {
			return nil, err
		}
		if drop[d] {
			return nil, fmt.Errorf("tensordict: %s: dimension %d repeated in %v", op, d, dims)
		}
		drop[d], res[i] = true, d
	}
	nb := func(b []int) []int {
		out := make([]int, 0, len(b))
		for i, s := range b {
			if i >= len(drop) || !drop[i] {
				out = append(out, s)
			}
		}
		return out
	}
	return td.indexed(op, nb, func(t *tensor.Tensor) (*tensor.Tensor, error) { return fn(t, res) })
}

// Sum returns the sum of every leaf over batch dimensions dims (all
// elements, with no dims).
func (td *TensorDict) Sum(dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Sum", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.SumDims(d, false) })
}

// Mean returns the mean of every leaf over dims, like Sum; leaves must be
// floating or complex.
func (td *TensorDict) Mean(dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Mean", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.MeanDims(d, false) })
}

// Prod returns the product of every leaf over dims, like Sum.
func (td *TensorDict) Prod(dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Prod", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.ProdDims(d, false) })
}

// Max returns the largest element of every leaf over dims, like Sum. With
// dims it returns the values only, as Python's max(dim,
// return_indices=False); several dims reduce together, as torch.amax.
func (td *TensorDict) Max(dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Max", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.MaxDims(d, false) })
}

// Min returns the smallest element of every leaf over dims, like Max.
func (td *TensorDict) Min(dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Min", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.MinDims(d, false) })
}

// Std returns the standard deviation of every leaf over dims, with
// Bessel's correction (Python's default correction=1); see StdCorrection.
func (td *TensorDict) Std(dims ...int) (*TensorDict, error) { return td.StdCorrection(1, dims...) }

// Var returns the variance of every leaf over dims, with Bessel's
// correction; see VarCorrection.
func (td *TensorDict) Var(dims ...int) (*TensorDict, error) { return td.VarCorrection(1, dims...) }

// StdCorrection is Std dividing by n - correction.
func (td *TensorDict) StdCorrection(correction int, dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Std", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) {
		return t.StdDims(d, correction, false)
	})
}

// VarCorrection is Var dividing by n - correction.
func (td *TensorDict) VarCorrection(correction int, dims ...int) (*TensorDict, error) {
	return td.reduceBatch("Var", dims, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) {
		return t.VarDims(d, correction, false)
	})
}

// AllDim returns, for every leaf, whether all its elements along batch
// dimension dim are true (nonzero), like Python's td.all(dim): the result
// has that dimension removed from its batch size.
func (td *TensorDict) AllDim(dim int) (*TensorDict, error) {
	return td.reduceBatch("AllDim", []int{dim}, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.AllDims(d, false) })
}

// AnyDim returns, for every leaf, whether some element along batch
// dimension dim is true, like AllDim.
func (td *TensorDict) AnyDim(dim int) (*TensorDict, error) {
	return td.reduceBatch("AnyDim", []int{dim}, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) { return t.AnyDims(d, false) })
}

// MaxDim returns the largest element of every leaf along batch dimension
// dim and its position there, as two TensorDicts of the same structure,
// like Python's max(dim) (whose return_indices defaults to true): values
// keep each leaf's dtype, indices are int64. Both have dim removed from
// their batch size.
func (td *TensorDict) MaxDim(dim int) (values, indices *TensorDict, err error) {
	return td.extremeDim("MaxDim", dim, (*tensor.Tensor).MaxDim)
}

// MinDim returns the smallest element of every leaf along batch dimension
// dim and its position, like MaxDim.
func (td *TensorDict) MinDim(dim int) (values, indices *TensorDict, err error) {
	return td.extremeDim("MinDim", dim, (*tensor.Tensor).MinDim)
}

func (td *TensorDict) extremeDim(op string, dim int, pick func(t *tensor.Tensor, dim int, keep bool) (*tensor.Tensor, *tensor.Tensor, error)) (*TensorDict, *TensorDict, error) {
	// Both results walk td's leaves in the same order: the second takes
	// the indices the first computed, one by one.
	var idx []*tensor.Tensor
	values, err := td.reduceBatch(op, []int{dim}, func(t *tensor.Tensor, d []int) (*tensor.Tensor, error) {
		v, i, err := pick(t, d[0], false)
		idx = append(idx, i)
		return v, err
	})
	if err != nil {
		return nil, nil, err
	}
	indices, err := td.reduceBatch(op, []int{dim}, func(*tensor.Tensor, []int) (*tensor.Tensor, error) {
		i := idx[0]
		idx = idx[1:]
		return i, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return values, indices, nil
}

// zipSpec says how zip combines TensorDicts of the same structure.
type zipSpec struct {
	op string
	// batch returns the batch size of the result node from the inputs'
	// batch sizes at that node, or an error.
	batch func(batches [][]int) ([]int, error)
	// leaf returns the result leaf k from the inputs' leaves k (nil drops
	// it).
	leaf func(k Key, ts []*tensor.Tensor) (*tensor.Tensor, error)
	// nonTensor returns the result value k from the inputs' values, held
	// at the inputs' batch sizes batches, for a result of batch size nb;
	// nil means the value of the first input, which the others must equal.
	nonTensor func(k Key, vs []any, batches [][]int, nb []int) (any, error)
}

// zip walks TensorDicts that have the same keys at every level (in any
// order; the result has the first one's order) and builds the result the
// spec describes. An error names the first key that differs (wrapping
// ErrMismatch when keys, kinds or batch sizes differ), or the first key
// whose leaves the spec refuses.
func zip(s *zipSpec, tds []*TensorDict) (*TensorDict, error) {
	for i, o := range tds {
		if o == nil {
			return nil, fmt.Errorf("tensordict: %s: tensordict %d is nil", s.op, i)
		}
	}
	return guarded(s.op, func() (*TensorDict, error) { return zipAt(s, nil, tds) })
}

func zipAt(s *zipSpec, prefix Key, tds []*TensorDict) (*TensorDict, error) {
	first := tds[0]
	batches := make([][]int, len(tds))
	for n, o := range tds {
		batches[n] = o.batch
		if len(o.entries) != len(first.entries) {
			for i := range o.entries {
				if _, ok := first.lookup(o.entries[i].name); !ok {
					return nil, fmt.Errorf("tensordict: %s: key %v of tensordict %d missing from tensordict 0 (keys %v vs %v): %w", s.op, prefix.child(o.entries[i].name), n, o.names(), first.names(), ErrMismatch)
				}
			}
			// o lacks a key of first: the loop below names it.
		}
	}
	nb, err := s.batch(batches)
	if err != nil {
		return nil, fmt.Errorf("tensordict: %s: at %v: %w: %w", s.op, keyOrRoot(prefix), err, ErrMismatch)
	}
	out := newTD(nb)
	out.class = first.class
	out.entries = make([]entry, 0, len(first.entries))
	parts := make([]*entry, len(tds))
	for i := range first.entries {
		e := &first.entries[i]
		k := prefix.child(e.name)
		for n, o := range tds {
			j, ok := o.lookup(e.name)
			if !ok {
				return nil, fmt.Errorf("tensordict: %s: key %v missing from tensordict %d: %w", s.op, k, n, ErrMismatch)
			}
			if parts[n] = &o.entries[j]; parts[n].kind != e.kind {
				return nil, fmt.Errorf("tensordict: %s: key %v is a %v in tensordict %d and a %v in tensordict 0: %w", s.op, k, parts[n].kind, n, e.kind, ErrMismatch)
			}
		}
		switch e.kind {
		case kindTensor:
			ts := make([]*tensor.Tensor, len(tds))
			for n, p := range parts {
				ts[n] = p.t
			}
			t, err := s.leafOf(k, ts)
			if err != nil {
				return nil, fmt.Errorf("tensordict: %s: key %v: %w", s.op, k, err)
			}
			if t == nil {
				continue
			}
			if sh := t.Shape(); !hasPrefix(sh, nb) {
				return nil, fmt.Errorf("tensordict: %s: key %v: result shape %v does not start with batch size %v", s.op, k, sh, nb)
			}
			out.add(e.name, entry{kind: kindTensor, t: t})
		case kindTD:
			subs := make([]*TensorDict, len(tds))
			for n, p := range parts {
				subs[n] = p.td
			}
			sub, err := zipAt(s, k, subs)
			if err != nil {
				return nil, err
			}
			out.add(e.name, entry{kind: kindTD, td: sub})
		case kindNonTensor:
			vs := make([]any, len(tds))
			for n, p := range parts {
				vs[n] = p.v
			}
			v, err := s.value(k, vs, batches, nb)
			if err != nil {
				return nil, err
			}
			if st, ok := v.(*NonTensorStack); ok && !equalInts(st.shape, nb) {
				return nil, fmt.Errorf("tensordict: %s: key %v: a NonTensorStack (values that differ along the batch) of shape %v cannot take batch size %v", s.op, k, st.shape, nb)
			}
			out.add(e.name, entry{kind: kindNonTensor, v: v})
		}
	}
	return out, nil
}

// leafOf returns s.leaf(k, ts): a result too large for memory that a form
// of the tensor package without an error result panicked with becomes
// its error (see catchNoMemory).
func (s *zipSpec) leafOf(k Key, ts []*tensor.Tensor) (_ *tensor.Tensor, err error) {
	defer catchNoMemory(&err, "", nil)
	return s.leaf(k, ts)
}

// value combines the non-tensor values k of the inputs.
func (s *zipSpec) value(k Key, vs []any, batches [][]int, nb []int) (any, error) {
	if s.nonTensor != nil {
		v, err := s.nonTensor(k, vs, batches, nb)
		if err != nil {
			return nil, fmt.Errorf("tensordict: %s: %w", s.op, err)
		}
		return v, nil
	}
	for n, v := range vs[1:] {
		if !equalValues(v, vs[0]) {
			return nil, fmt.Errorf("tensordict: %s: non-tensor key %v differs between tensordict 0 and %d (only equal values can be combined)", s.op, k, n+1)
		}
	}
	return cloneValue(vs[0]), nil
}

// firstValue keeps the non-tensor value of the first input, whatever the
// others hold.
func firstValue(_ Key, vs []any, _ [][]int, _ []int) (any, error) { return cloneValue(vs[0]), nil }

// sameBatches is the batch function of element-wise zips: every input must
// have the first one's batch size.
func sameBatches(batches [][]int) ([]int, error) {
	for n, b := range batches[1:] {
		if !equalInts(b, batches[0]) {
			return nil, fmt.Errorf("tensordict %d has batch size %v, tensordict 0 has %v", n+1, b, batches[0])
		}
	}
	return batches[0], nil
}

// zip2 combines td and o leaf by leaf with fn, keeping td's batch size and
// non-tensor values.
func (td *TensorDict) zip2(op string, o *TensorDict, fn func(a, b *tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return zip(&zipSpec{
		op:        op,
		batch:     sameBatches,
		leaf:      func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return fn(ts[0], ts[1]) },
		nonTensor: firstValue,
	}, []*TensorDict{td, o})
}

// zip2InPlace checks that o has td's structure, then applies fn to each
// pair of leaves, which writes into td's leaf. On an error from fn, the
// leaves before the failing one have been written.
func (td *TensorDict) zip2InPlace(op string, o *TensorDict, fn func(a, b *tensor.Tensor) error) error {
	if _, err := td.zip2(op, o, func(a, _ *tensor.Tensor) (*tensor.Tensor, error) { return a, nil }); err != nil {
		return err
	}
	_, err := td.zip2(op, o, func(a, b *tensor.Tensor) (*tensor.Tensor, error) { return a, fn(a, b) })
	return err
}

// eachLeaf applies fn to every tensor leaf of td in place, naming the key in
// an error.
func (td *TensorDict) eachLeaf(op string, fn func(t *tensor.Tensor) error) error {
	return td.guardedWalk(op, func(k Key, n *TensorDict, j int) error {
		if err := fn(n.entries[j].t); err != nil {
			return fmt.Errorf("tensordict: %s: key %v: %w", op, k, err)
		}
		return nil
	})
}

// mapLeaves returns a TensorDict with td's structure whose leaves are fn of
// td's, naming the key in an error.
func (td *TensorDict) mapLeaves(op string, fn func(t *tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return td.indexed(op, sameBatch, fn)
}
