package tensor

import (
	"math"
	"math/cmplx"

	"gonum.org/v1/gonum/floats"
)

// chunksF64 calls fn with the elements of t, in row-major order, converted
// to float64 (the real part of complex ones), a chunk at a time. Contiguous
// float64 tensors are passed in place, in one call.
func (t *Tensor) chunksF64(fn func([]float64)) {
	x := t.Contiguous()
	n := x.Numel()
	if n == 0 {
		return
	}
	if x.dtype == Float64 {
		fn(elems[float64](x)[:n])
		return
	}
	buf := make([]float64, min(n, convChunk))
	for i := 0; i < n; i += convChunk {
		b := buf[:min(convChunk, n-i)]
		readF64(x, i, b)
		fn(b)
	}
}

// Sum returns the sum of t's elements, accumulated in float64 (bools count
// as 0 and 1; int64 values beyond 2^53 are rounded). For a complex tensor it
// is the real part of the sum; see SumComplex. The sum of an empty tensor is
// 0. Sum panics if t's storage was released.
func (t *Tensor) Sum() float64 {
	s := 0.0
	t.chunksF64(func(b []float64) { s += floats.Sum(b) })
	return s
}

// SumComplex returns the sum of t's elements as a complex128, for any dtype.
// It panics if t's storage was released.
func (t *Tensor) SumComplex() complex128 {
	if !t.dtype.IsComplex() {
		return complex(t.Sum(), 0)
	}
	x := t.Contiguous()
	n := x.Numel()
	var s complex128
	buf := make([]complex128, min(n, convChunk))
	for i := 0; i < n; i += convChunk {
		b := buf[:min(convChunk, n-i)]
		readC128(x, i, b)
		for _, v := range b {
			s += v
		}
	}
	return s
}

// Mean returns Sum divided by the number of elements: NaN for an empty
// tensor. For a complex tensor it is the real part of the mean.
func (t *Tensor) Mean() float64 {
	n := t.Numel()
	if n == 0 {
		return math.NaN()
	}
	return t.Sum() / float64(n)
}

// Max returns the largest element of t as a float64 (the largest real part,
// for a complex tensor). It is NaN if an element is NaN, as in torch, or if t
// is empty. Max panics if t's storage was released.
func (t *Tensor) Max() float64 { return t.extreme(floats.Max, math.Max) }

// Min returns the smallest element of t, like Max.
func (t *Tensor) Min() float64 { return t.extreme(floats.Min, math.Min) }

func (t *Tensor) extreme(of func([]float64) float64, pick func(x, y float64) float64) float64 {
	m, seen := math.NaN(), false
	t.chunksF64(func(b []float64) {
		if math.IsNaN(m) && seen {
			return
		}
		var v float64
		if floats.HasNaN(b) {
			v = math.NaN()
		} else {
			v = of(b)
		}
		if !seen {
			m, seen = v, true
			return
		}
		m = pick(m, v)
	})
	return m
}

// AllClose reports whether every pair of broadcast elements of t and o is
// close, as IsClose decides with equalNaN false, like torch.allclose. It
// returns an error if the shapes do not broadcast or a storage was released.
func (t *Tensor) AllClose(o *Tensor, rtol, atol float64) (bool, error) {
	c, err := t.isClose("AllClose", o, rtol, atol, false)
	if err != nil {
		return false, err
	}
	return c.All(), nil
}

// IsClose returns the bool tensor of |t - o| <= atol + rtol*|o| over the
// broadcast elements of t and o, like torch.isclose: values are compared as
// float64 (complex ones by the modulus of their difference), equal values
// (infinities of the same sign included) are close, and NaN is close to NaN
// only when equalNaN is set. It returns an error if the shapes do not
// broadcast or a storage was released.
func (t *Tensor) IsClose(o *Tensor, rtol, atol float64, equalNaN bool) (*Tensor, error) {
	return t.isClose("IsClose", o, rtol, atol, equalNaN)
}

func (t *Tensor) isClose(name string, o *Tensor, rtol, atol float64, equalNaN bool) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	dt := Float64
	if t.dtype.IsComplex() || o.dtype.IsComplex() {
		dt = Complex128
	}
	p, err := prepare(name, t, o, dt)
	if err != nil {
		return nil, err
	}
	res := mustAlloc(name, Bool, p.shape, true)
	if dt == Float64 {
		map2(elems[bool](res), elems[float64](p.a), elems[float64](p.b), p.shape, p.sa, p.sb, func(x, y float64) bool {
			switch {
			case x == y:
				return true
			case math.IsNaN(x) || math.IsNaN(y):
				return equalNaN && math.IsNaN(x) && math.IsNaN(y)
			case math.IsInf(x, 0) || math.IsInf(y, 0):
				return false
			}
			return math.Abs(x-y) <= atol+rtol*math.Abs(y)
		})
	} else {
		map2(elems[bool](res), elems[complex128](p.a), elems[complex128](p.b), p.shape, p.sa, p.sb, func(x, y complex128) bool {
			switch {
			case x == y:
				return true
			case cmplx.IsNaN(x) || cmplx.IsNaN(y):
				return equalNaN && cmplx.IsNaN(x) && cmplx.IsNaN(y)
			case cmplx.IsInf(x) || cmplx.IsInf(y):
				return false
			}
			return cmplx.Abs(x-y) <= atol+rtol*cmplx.Abs(y)
		})
	}
	return res, nil
}
