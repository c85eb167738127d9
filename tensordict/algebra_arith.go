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
