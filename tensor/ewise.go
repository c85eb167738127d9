package tensor

import "fmt"

// The element-wise operations beyond Add, Sub, Mul and Div (Pow, Neg, Abs,
// Clamp, Lerp) compute in one of four domains, so that each is written once
// per kind of number rather than once per dtype:
//
//   - bool and integer dtypes compute in int64: wrapping arithmetic in int64
//     and truncation to the narrower type give exactly the narrow type's
//     wrapping result (addition, multiplication, negation and powers are
//     ring operations modulo 2^n), so integers stay exact;
//   - float16, bfloat16 and float32 compute in float32 (halves widen
//     exactly and round back once);
//   - float64 computes in float64;
//   - complex dtypes compute in complex128 (complex64 rounds back once).

// domainOf returns the dtype in which element-wise operations on elements
// of dtype dt are computed.
func domainOf(dt DType) DType {
	switch {
	case category(dt) <= 1:
		return Int64
	case dt == Float64:
		return Float64
	case dt.IsComplex():
		return Complex128
	default:
		return Float32
	}
}

// floatNum is the set of Go types real floating computations run in.
type floatNum interface{ float32 | float64 }

// kernel is one element-wise operation written for each domain. Each
// function receives the result's elements and the operands' elements, all
// contiguous and of the same length. A nil function means the operation is
// not defined in that domain.
type kernel struct {
	i   func(out []int64, in [][]int64)
	f32 func(out []float32, in [][]float32)
	f64 func(out []float64, in [][]float64)
	c   func(out []complex128, in [][]complex128)
}

// ewise applies k to the operands ins, which broadcast against each other,
// in the domain of dtype comp, and returns the result converted to dtype res.
// name names the operation in errors.
func ewise(name string, res, comp DType, k kernel, ins ...*Tensor) (out *Tensor, err error) {
	defer catchNoMemory(&err)
	shape := []int{}
	for _, x := range ins {
		s, ok := broadcastShapes(shape, x.shape())
		if !ok {
			return nil, fmt.Errorf("tensor: %s: shapes %v do not broadcast", name, shapesOf(ins))
		}
		shape = s
		if err := x.st.checkLive(name); err != nil {
			return nil, err
		}
	}
	dom := domainOf(comp)
	out = mustAlloc(name, dom, shape, true) // first: it checks the size
	flat := make([]*Tensor, len(ins))
	for i, x := range ins {
		e, _ := x.Expand(shape...) // broadcastShapes accepted it
		flat[i] = e.To(dom)
	}
	n := out.Numel()
	ok := false
	switch dom {
	case Int64:
		ok = runKernel(k.i, out, flat, n)
	case Float32:
		ok = runKernel(k.f32, out, flat, n)
	case Float64:
		ok = runKernel(k.f64, out, flat, n)
	default:
		ok = runKernel(k.c, out, flat, n)
	}
	if !ok {
		return nil, fmt.Errorf("tensor: %s: not supported for %v", name, comp)
	}
	if res != dom {
		out = out.To(res)
	}
	return out, nil
}

// runKernel calls f over the contiguous elements of out and ins; it returns
// false if f is nil.
func runKernel[T Elem](f func([]T, [][]T), out *Tensor, ins []*Tensor, n int) bool {
	if f == nil {
		return false
	}
	in := make([][]T, len(ins))
	for i, x := range ins {
		in[i] = elems[T](x)[:n]
	}
	f(elems[T](out)[:n], in)
	return true
}

// shapesOf returns the shapes of ts, for messages.
func shapesOf(ts []*Tensor) [][]int {
	out := make([][]int, len(ts))
	for i, x := range ts {
		out[i] = x.shape()
	}
	return out
}

// store returns the function that writes r, the out-of-place result of the
// operation name on t, into t, or returns err if the operation failed: r's
// dtype must not be of a higher kind than t's (a float result into an
// integer tensor, a complex one into a real tensor), as in torch's in-place
// operations. Use it as t.store("NegInPlace")(t.Neg()).
func (t *Tensor) store(name string) func(r *Tensor, err error) error {
	return func(r *Tensor, err error) error {
		if err != nil {
			return err
		}
		return t.storeResult(name, r)
	}
}

// storeResult writes r, the out-of-place result of the operation name on t,
// into t, as store does.
func (t *Tensor) storeResult(name string, r *Tensor) error {
	if category(r.dtype) > category(t.dtype) {
		return fmt.Errorf("tensor: %s: result %v cannot be stored in %v tensor", name, r.dtype, t.dtype)
	}
	if err := t.CopyFrom(r); err != nil {
		return fmt.Errorf("tensor: %s: %w", name, err)
	}
	return nil
}
