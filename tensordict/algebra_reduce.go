package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/tensor"
)

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
