package tensor

import (
	"fmt"
	"math"
	"math/cmplx"
	"slices"

	"gonum.org/v1/gonum/floats"
)

// Reductions over dimensions (SumDims, MeanDims, ProdDims, MaxDims,
// MinDims, StdDims, VarDims, AllDims, AnyDims) return tensors with torch's
// result dtypes, unlike the whole-tensor reductions Sum, Mean, Max and Min,
// which return a float64 for convenience:
//
//   - sum and prod of bool and integer tensors give int64 (exact, wrapping
//     around on overflow), of floating and complex tensors their own dtype;
//   - mean, std and var need a floating or complex tensor (an integer one is
//     an error, as in torch); std and var of a complex tensor are real;
//   - max and min keep the dtype (complex is an error), propagate NaN, and
//     are an error over an empty set of elements;
//   - all and any give bool (uint8 for a uint8 tensor, as in torch).
//
// Floating values accumulate in float64 and round once to the result dtype.
// dims lists the dimensions to reduce (negative ones count from the end);
// none means every dimension. keepDim keeps them with size 1.

// reduction is one reduction written for each accumulation domain: int64,
// float64 and complex128. A nil function means it is not defined there.
type reduction struct {
	name  string
	i     func(row []int64) int64
	f     func(row []float64) float64
	c     func(row []complex128) complex128
	empty bool // defined over no elements
}

// SumDims returns the sum of t over dims.
func (t *Tensor) SumDims(dims []int, keepDim bool) (*Tensor, error) {
	return t.reduceDims(sumRed, intToI64Type(t.dtype), dims, keepDim)
}

// ProdDims returns the product of t's elements over dims.
func (t *Tensor) ProdDims(dims []int, keepDim bool) (*Tensor, error) {
	return t.reduceDims(prodRed, intToI64Type(t.dtype), dims, keepDim)
}

// MeanDims returns the mean of t over dims; t must be floating or complex.
// The mean over no elements is NaN.
func (t *Tensor) MeanDims(dims []int, keepDim bool) (*Tensor, error) {
	if category(t.dtype) < 2 {
		return nil, fmt.Errorf("tensor: MeanDims: needs a floating or complex tensor, have %v", t.dtype)
	}
	return t.reduceDims(meanRed, t.dtype, dims, keepDim)
}

// MaxDims returns the largest element of t over dims (NaN if one is NaN).
func (t *Tensor) MaxDims(dims []int, keepDim bool) (*Tensor, error) {
	return t.extremeDims(maxRed, dims, keepDim)
}

// MinDims returns the smallest element of t over dims, like MaxDims.
func (t *Tensor) MinDims(dims []int, keepDim bool) (*Tensor, error) {
	return t.extremeDims(minRed, dims, keepDim)
}

func (t *Tensor) extremeDims(r reduction, dims []int, keepDim bool) (*Tensor, error) {
	if t.dtype.IsComplex() {
		return nil, fmt.Errorf("tensor: %s: not supported for %v", r.name, t.dtype)
	}
	return t.reduceDims(r, t.dtype, dims, keepDim)
}

// VarDims returns the variance of t over dims: the sum of squared
// deviations from the mean (their squared modulus, for complex values)
// divided by n - correction, like torch.var (correction 1 is the unbiased
// estimate, 0 the population variance). It is NaN or Inf when n <=
// correction. t must be floating or complex; the result is real.
func (t *Tensor) VarDims(dims []int, correction int, keepDim bool) (*Tensor, error) {
	return t.moments("VarDims", dims, correction, keepDim, false)
}

// StdDims returns the standard deviation of t over dims: the square root of
// VarDims.
func (t *Tensor) StdDims(dims []int, correction int, keepDim bool) (*Tensor, error) {
	return t.moments("StdDims", dims, correction, keepDim, true)
}

func (t *Tensor) moments(name string, dims []int, correction int, keepDim, root bool) (*Tensor, error) {
	if category(t.dtype) < 2 {
		return nil, fmt.Errorf("tensor: %s: needs a floating or complex tensor, have %v", name, t.dtype)
	}
	res := realOf(t.dtype)
	finish := func(ss float64, n int) float64 {
		v := ss / float64(n-correction)
		if root {
			v = math.Sqrt(v)
		}
		return v
	}
	r := reduction{
		name:  name,
		empty: true,
		f: func(row []float64) float64 {
			m := floats.Sum(row) / float64(len(row))
			ss := 0.0
			for _, x := range row {
				ss += (x - m) * (x - m)
			}
			return finish(ss, len(row))
		},
		c: func(row []complex128) complex128 {
			var m complex128
			for _, x := range row {
				m += x
			}
			m /= complex(float64(len(row)), 0)
			ss := 0.0
			for _, x := range row {
				d := cmplx.Abs(x - m)
				ss += d * d
			}
			return complex(finish(ss, len(row)), 0)
		},
	}
	return t.reduceDims(r, res, dims, keepDim)
}

// AllDims reports over dims whether every element is true (nonzero).
func (t *Tensor) AllDims(dims []int, keepDim bool) (*Tensor, error) {
	return t.logicalDims(minRed, dims, keepDim)
}

// AnyDims reports over dims whether some element is true (nonzero).
func (t *Tensor) AnyDims(dims []int, keepDim bool) (*Tensor, error) {
	return t.logicalDims(maxRed, dims, keepDim)
}

func (t *Tensor) logicalDims(r reduction, dims []int, keepDim bool) (*Tensor, error) {
	res := Bool
	if t.dtype == Uint8 {
		res = Uint8
	}
	r.empty = true // min of nothing is true (1), max of nothing false (0)
	return t.asBool().reduceDims(r, res, dims, keepDim)
}

// intToI64Type returns int64 for bool and integer dtypes, dt otherwise: the
// result dtype of sum and prod.
func intToI64Type(dt DType) DType {
	if category(dt) <= 1 {
		return Int64
	}
	return dt
}

var (
	sumRed = reduction{
		name:  "SumDims",
		empty: true,
		i: func(row []int64) int64 {
			s := int64(0)
			for _, v := range row {
				s += v
			}
			return s
		},
		f: floats.Sum,
		c: func(row []complex128) complex128 {
			var s complex128
			for _, v := range row {
				s += v
			}
			return s
		},
	}
	prodRed = reduction{
		name:  "ProdDims",
		empty: true,
		i: func(row []int64) int64 {
			p := int64(1)
			for _, v := range row {
				p *= v
			}
			return p
		},
		f: floats.Prod,
		c: func(row []complex128) complex128 {
			p := complex128(1)
			for _, v := range row {
				p *= v
			}
			return p
		},
	}
	meanRed = reduction{
		name:  "MeanDims",
		empty: true,
		f:     func(row []float64) float64 { return floats.Sum(row) / float64(len(row)) },
		c: func(row []complex128) complex128 {
			return sumRed.c(row) / complex(float64(len(row)), 0)
		},
	}
	maxRed = extremeRed("MaxDims", slices.Max[[]int64], floats.Max, 0)
	minRed = extremeRed("MinDims", slices.Min[[]int64], floats.Min, 1)
)

// extremeRed returns the reduction that picks an extreme with pickI and
// pickF, propagating NaN; over no elements (which only AllDims and AnyDims
// allow) it gives none.
func extremeRed(name string, pickI func([]int64) int64, pickF func([]float64) float64, none int64) reduction {
	return reduction{
		name: name,
		i: func(row []int64) int64 {
			if len(row) == 0 {
				return none
			}
			return pickI(row)
		},
		f: func(row []float64) float64 {
			if floats.HasNaN(row) {
				return math.NaN()
			}
			return pickF(row)
		},
	}
}

// reduceDims reduces t over dims with r, accumulating in int64, float64 or
// complex128, and returns the result converted to dtype res.
func (t *Tensor) reduceDims(r reduction, res DType, dims []int, keepDim bool) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if err := t.st.checkLive(r.name); err != nil {
		return nil, err
	}
	nd := len(t.shape())
	reduced := make([]bool, nd)
	if len(dims) == 0 {
		for i := range reduced {
			reduced[i] = true
		}
	}
	for _, dim := range dims {
		d, err := checkDim(r.name, dim, nd, t.shape())
		if err != nil {
			return nil, err
		}
		if reduced[d] {
			return nil, fmt.Errorf("tensor: %s: dimension %d repeated in %v", r.name, d, dims)
		}
		reduced[d] = true
	}
	var perm, outShape, keepShape []int
	outer, inner := 1, 1
	for d := range nd {
		if !reduced[d] {
			perm = append(perm, d)
			outShape = append(outShape, t.shape()[d])
			keepShape = append(keepShape, t.shape()[d])
			outer *= t.shape()[d]
		} else {
			keepShape = append(keepShape, 1)
		}
	}
	for d := range nd {
		if reduced[d] {
			perm = append(perm, d)
			inner *= t.shape()[d]
		}
	}
	if inner == 0 && !r.empty && outer > 0 {
		return nil, fmt.Errorf("tensor: %s: reduction over no elements (shape %v, dimensions %v)", r.name, t.shape(), dims)
	}
	p, _ := t.Permute(perm...)
	acc := Float64
	switch {
	case category(t.dtype) <= 1:
		acc = Int64
	case t.dtype.IsComplex():
		acc = Complex128
	}
	x := p.To(acc)
	out := mustAlloc(r.name, acc, []int{outer}, true)
	ok := false
	switch acc {
	case Int64:
		ok = reduceRows(r.i, out, x, inner)
	case Float64:
		ok = reduceRows(r.f, out, x, inner)
	default:
		ok = reduceRows(r.c, out, x, inner)
	}
	if !ok {
		return nil, fmt.Errorf("tensor: %s: not supported for %v", r.name, t.dtype)
	}
	if keepDim {
		outShape = keepShape
	}
	if outShape == nil {
		outShape = []int{}
	}
	out, _ = out.Reshape(outShape...)
	if res != acc {
		out = out.To(res)
	}
	return out, nil
}

// reduceRows sets out[i] to f of row i (of length inner) of the contiguous
// x; it returns false if f is nil.
func reduceRows[T Elem](f func([]T) T, out, x *Tensor, inner int) bool {
	if f == nil {
		return false
	}
	o, src := elems[T](out), elems[T](x)
	for i := range out.Numel() {
		o[i] = f(src[i*inner : (i+1)*inner])
	}
	return true
}
