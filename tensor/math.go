package tensor

import (
	"fmt"
	"math"
	"math/cmplx"
)

// Pow returns t raised to the power o, element by element, in a new
// contiguous tensor. t and o broadcast and promote as in Add. Integers
// compute exactly (wrapping around on overflow); an integer raised to a
// negative integer power is 0 unless the base is 1 or -1, as in torch,
// whose pow of two integer tensors does the same while its pow with a
// negative integer scalar raises, as PowScalar refuses one.
// float16 and bfloat16 compute in float32. Pow of two bool tensors is an
// error, as are shapes that do not broadcast.
func (t *Tensor) Pow(o *Tensor) (*Tensor, error) {
	res := PromoteTypes(t.dtype, o.dtype)
	if res == Bool {
		return nil, fmt.Errorf("tensor: Pow: bool to a bool power is not supported")
	}
	return ewise("Pow", res, res, powKernel, t, o)
}

// PowScalar returns t raised to the power v, element by element. The result
// dtype follows the scalar rule of AddScalar (an integer tensor stays integer
// for an integral v). An integer tensor to a negative integral power is an
// error, as in torch.
func (t *Tensor) PowScalar(v float64) (*Tensor, error) {
	res := scalarDType(opMul, t.dtype, v)
	if category(res) <= 1 && v < 0 {
		return nil, fmt.Errorf("tensor: PowScalar: %v tensor to the negative power %v: integers to negative integer powers are not allowed", t.dtype, v)
	}
	return ewise("PowScalar", res, res, powKernel, t, Full(domainOf(res), v))
}

// PowInPlace sets t to t raised to the power o; the result must fit t's
// dtype, as in AddInPlace.
func (t *Tensor) PowInPlace(o *Tensor) error {
	return t.store("PowInPlace")(t.Pow(o))
}

// PowScalarInPlace sets t to t raised to the power v, like PowInPlace.
func (t *Tensor) PowScalarInPlace(v float64) error {
	return t.store("PowScalarInPlace")(t.PowScalar(v))
}

var powKernel = kernel{
	i: func(out []int64, in [][]int64) {
		for k := range out {
			out[k] = ipow(in[0][k], in[1][k])
		}
	},
	f32: powF[float32],
	f64: powF[float64],
	c: func(out []complex128, in [][]complex128) {
		for k := range out {
			out[k] = cmplx.Pow(in[0][k], in[1][k])
		}
	},
}

func powF[F floatNum](out []F, in [][]F) {
	for k := range out {
		out[k] = F(math.Pow(float64(in[0][k]), float64(in[1][k])))
	}
}

// ipow returns x to the power e, wrapping around, by repeated squaring.
func ipow(x, e int64) int64 {
	if e < 0 {
		switch x {
		case 1:
			return 1
		case -1:
			if e%2 == 0 {
				return 1
			}
			return -1
		}
		return 0
	}
	r := int64(1)
	for e > 0 {
		if e&1 == 1 {
			r *= x
		}
		x *= x
		e >>= 1
	}
	return r
}

// Neg returns -t, element by element, in a new tensor of t's dtype.
// Integers wrap around (-(-128) is -128 in int8). Negating a bool tensor is
// an error, as in torch.
func (t *Tensor) Neg() (*Tensor, error) {
	if t.dtype == Bool {
		return nil, fmt.Errorf("tensor: Neg: negation of a bool tensor is not supported; use LogicalNot")
	}
	return ewise("Neg", t.dtype, t.dtype, negKernel, t)
}

// NegInPlace sets t to -t, like Neg.
func (t *Tensor) NegInPlace() error {
	return t.store("NegInPlace")(t.Neg())
}

var negKernel = kernel{
	i:   negN[int64],
	f32: negN[float32],
	f64: negN[float64],
	c:   negN[complex128],
}

func negN[T int64 | float32 | float64 | complex128](out []T, in [][]T) {
	for k, v := range in[0] {
		out[k] = -v
	}
}

// LogicalNot returns the bool tensor of !t (t == 0), element by element.
func (t *Tensor) LogicalNot() *Tensor { return t.EqScalar(0) }

// Abs returns |t|, element by element. Integers wrap around (|-128| is -128
// in int8, as in torch); a complex tensor gives its modulus as a real tensor
// (complex64 gives float32). Abs of a bool tensor is an error.
func (t *Tensor) Abs() (*Tensor, error) {
	if t.dtype == Bool {
		return nil, fmt.Errorf("tensor: Abs: not supported for bool")
	}
	return ewise("Abs", realOf(t.dtype), t.dtype, absKernel, t)
}

// AbsInPlace sets t to |t|; t must be real.
func (t *Tensor) AbsInPlace() error {
	if t.dtype.IsComplex() {
		return fmt.Errorf("tensor: AbsInPlace: the modulus of a %v tensor is real and cannot be stored in place", t.dtype)
	}
	return t.store("AbsInPlace")(t.Abs())
}

var absKernel = kernel{
	i: func(out []int64, in [][]int64) {
		for k, v := range in[0] {
			out[k] = max(v, -v)
		}
	},
	f32: absF[float32],
	f64: absF[float64],
	c: func(out []complex128, in [][]complex128) {
		for k, v := range in[0] {
			out[k] = complex(cmplx.Abs(v), 0)
		}
	},
}

func absF[F floatNum](out []F, in [][]F) {
	for k, v := range in[0] {
		out[k] = F(math.Abs(float64(v)))
	}
}

// Clamp returns t with every element limited to [lo, hi]: min(max(x, lo),
// hi), like torch.clamp, so that every element is hi when lo > hi. Pass
// math.Inf(-1) or math.Inf(1) for no bound. NaN elements stay NaN, and a NaN
// bound gives NaN. Floating tensors keep their dtype; integer tensors keep
// theirs when the finite bounds are integral and become float32 otherwise.
// Clamp of a bool or complex tensor is an error.
func (t *Tensor) Clamp(lo, hi float64) (*Tensor, error) {
	if t.dtype == Bool || t.dtype.IsComplex() {
		return nil, fmt.Errorf("tensor: Clamp: not supported for %v", t.dtype)
	}
	res := t.dtype
	intBound := func(v float64) bool { return math.IsInf(v, 0) || v == math.Trunc(v) }
	if category(res) == 1 && !(intBound(lo) && intBound(hi)) {
		res = Float32
	}
	k := kernel{
		f32: clampF[float32](lo, hi),
		f64: clampF[float64](lo, hi),
		i: func(out []int64, in [][]int64) {
			l, h := int64Bound(lo), int64Bound(hi)
			for j, v := range in[0] {
				out[j] = min(max(v, l), h)
			}
		},
	}
	return ewise("Clamp", res, res, k, t)
}

// ClampInPlace limits t's elements to [lo, hi], like Clamp; the result must
// fit t's dtype.
func (t *Tensor) ClampInPlace(lo, hi float64) error {
	return t.store("ClampInPlace")(t.Clamp(lo, hi))
}

// int64Bound converts an integral or infinite bound to int64, saturating.
func int64Bound(v float64) int64 {
	switch {
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}

func clampF[F floatNum](lo, hi float64) func([]F, [][]F) {
	l, h := F(lo), F(hi)
	return func(out []F, in [][]F) {
		for k, v := range in[0] {
			out[k] = min(max(v, l), h) // min and max propagate NaN
		}
	}
}

// Lerp returns the linear interpolation t + weight*(end - t), element by
// element, like torch.lerp: t, end and weight broadcast against each other,
// must be floating or complex, and compute in their promoted dtype (halves
// in float32). As in torch, weights of magnitude 0.5 or more compute
// end - (end - t)*(1 - weight), so that weight 1 gives end exactly.
func (t *Tensor) Lerp(end, weight *Tensor) (*Tensor, error) {
	res := PromoteTypes(PromoteTypes(t.dtype, end.dtype), weight.dtype)
	if category(res) < 2 {
		return nil, fmt.Errorf("tensor: Lerp: needs floating or complex tensors, have %v, %v and weight %v", t.dtype, end.dtype, weight.dtype)
	}
	return ewise("Lerp", res, res, lerpKernel, t, end, weight)
}

// LerpScalar is Lerp with the scalar weight w.
func (t *Tensor) LerpScalar(end *Tensor, w float64) (*Tensor, error) {
	res := PromoteTypes(t.dtype, end.dtype)
	if category(res) < 2 {
		return nil, fmt.Errorf("tensor: LerpScalar: needs floating or complex tensors, have %v and %v", t.dtype, end.dtype)
	}
	return ewise("LerpScalar", res, res, lerpKernel, t, end, Full(domainOf(res), w))
}

// LerpInPlace sets t to Lerp(end, weight); the result must fit t's dtype.
func (t *Tensor) LerpInPlace(end, weight *Tensor) error {
	return t.store("LerpInPlace")(t.Lerp(end, weight))
}

var lerpKernel = kernel{
	f32: lerpF[float32],
	f64: lerpF[float64],
	c: func(out []complex128, in [][]complex128) {
		for k := range out {
			s, e, w := in[0][k], in[1][k], in[2][k]
			if cmplx.Abs(w) < 0.5 {
				out[k] = s + w*(e-s)
			} else {
				out[k] = e - (e-s)*(1-w)
			}
		}
	},
}

func lerpF[F floatNum](out []F, in [][]F) {
	for k := range out {
		s, e, w := in[0][k], in[1][k], in[2][k]
		if math.Abs(float64(w)) < 0.5 {
			out[k] = s + w*(e-s)
		} else {
			out[k] = e - (e-s)*(1-w)
		}
	}
}

// realOf returns the real dtype of the same precision as dt: float32 for
// complex64, float64 for complex128, dt itself otherwise.
func realOf(dt DType) DType {
	switch dt {
	case Complex64:
		return Float32
	case Complex128:
		return Float64
	}
	return dt
}
