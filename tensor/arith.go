package tensor

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/floats"
)

// arithOp is an element-wise arithmetic operation.
type arithOp uint8

const (
	opAdd arithOp = iota
	opSub
	opMul
	opDiv
)

var arithNames = [...]string{"Add", "Sub", "Mul", "Div"}

// number is the set of Go types arithmetic is computed in.
type number interface {
	uint8 | int8 | int16 | int32 | int64 | float32 | float64 | complex64 | complex128
}

// Add returns t + o, element by element, in a new contiguous tensor. t and o
// broadcast against each other (see BroadcastShapes); the result has their
// promoted dtype (see PromoteTypes). Integers wrap around on overflow; bool +
// bool is logical or; float16 and bfloat16 are computed in float32 and
// rounded back. It returns an error if the shapes do not broadcast or a
// storage was released.
func (t *Tensor) Add(o *Tensor) (*Tensor, error) { return t.arith(opAdd, o) }

// Sub returns t - o, element by element, like Add. Subtracting bool tensors
// is an error, as in torch.
func (t *Tensor) Sub(o *Tensor) (*Tensor, error) { return t.arith(opSub, o) }

// Mul returns t * o, element by element, like Add; bool * bool is logical
// and.
func (t *Tensor) Mul(o *Tensor) (*Tensor, error) { return t.arith(opMul, o) }

// Div returns t / o, element by element, like Add. Division is true
// division, as in torch: bool and integer operands give a float32 result.
// Floating division by zero gives ±Inf or NaN.
func (t *Tensor) Div(o *Tensor) (*Tensor, error) { return t.arith(opDiv, o) }

// arithDType returns the dtype of the result of op on dtypes a and b, and the
// dtype it is computed in.
func arithDType(op arithOp, a, b DType) (res, comp DType) {
	res = PromoteTypes(a, b)
	if op == opDiv && category(res) <= 1 {
		res = Float32
	}
	comp = res
	if res == Float16 || res == BFloat16 {
		comp = Float32
	}
	return res, comp
}

func (t *Tensor) arith(op arithOp, o *Tensor) (out *Tensor, err error) {
	defer catchNoMemory(&err)
	name := arithNames[op]
	res, comp := arithDType(op, t.dtype, o.dtype)
	if op == opSub && res == Bool {
		return nil, fmt.Errorf("tensor: Sub: subtraction of bool tensors is not supported; use Ne for exclusive or")
	}
	p, err := prepare(name, t, o, comp)
	if err != nil {
		return nil, err
	}
	out = mustAlloc(name, comp, p.shape, true)
	if comp == Float64 && p.a.IsContiguous() && p.b.IsContiguous() &&
		equalInts(p.a.shape(), p.shape) && equalInts(p.b.shape(), p.shape) {
		n := out.Numel()
		dst, a, b := elems[float64](out)[:n], elems[float64](p.a)[:n], elems[float64](p.b)[:n]
		switch op {
		case opAdd:
			floats.AddTo(dst, a, b)
		case opSub:
			floats.SubTo(dst, a, b)
		case opMul:
			floats.MulTo(dst, a, b)
		default:
			floats.DivTo(dst, a, b)
		}
		return out, nil
	}
	switch comp {
	case Bool:
		f := func(x, y bool) bool { return x || y }
		if op == opMul {
			f = func(x, y bool) bool { return x && y }
		}
		map2(elems[bool](out), elems[bool](p.a), elems[bool](p.b), p.shape, p.sa, p.sb, f)
	case Uint8:
		arith2[uint8](op, out, p)
	case Int8:
		arith2[int8](op, out, p)
	case Int16:
		arith2[int16](op, out, p)
	case Int32:
		arith2[int32](op, out, p)
	case Int64:
		arith2[int64](op, out, p)
	case Float32:
		arith2[float32](op, out, p)
	case Float64:
		arith2[float64](op, out, p)
	case Complex64:
		arith2[complex64](op, out, p)
	case Complex128:
		arith2[complex128](op, out, p)
	}
	if res != comp {
		out = out.To(res)
	}
	return out, nil
}

func arith2[T number](op arithOp, out *Tensor, p *operands) {
	arithRows(op, elems[T](out), elems[T](p.a), elems[T](p.b), p.shape, p.sa, p.sb)
}

// AddInPlace sets t to t + o, element by element; o must broadcast to t's
// shape. The sum is computed as Add computes it and stored in t's dtype,
// which must be able to hold it: an integer tensor cannot take a floating
// operand, nor a real tensor a complex one. It returns an error on a shape or
// dtype mismatch, if t repeats elements (an expanded view) or if a storage was
// released.
func (t *Tensor) AddInPlace(o *Tensor) error { return t.arithInPlace(opAdd, o) }

// SubInPlace sets t to t - o, element by element, like AddInPlace.
func (t *Tensor) SubInPlace(o *Tensor) error { return t.arithInPlace(opSub, o) }

// MulInPlace sets t to t * o, element by element, like AddInPlace.
func (t *Tensor) MulInPlace(o *Tensor) error { return t.arithInPlace(opMul, o) }

// DivInPlace sets t to t / o, element by element, like AddInPlace; t must be
// of a floating or complex dtype.
func (t *Tensor) DivInPlace(o *Tensor) error { return t.arithInPlace(opDiv, o) }

func (t *Tensor) arithInPlace(op arithOp, o *Tensor) (err error) {
	defer catchNoMemory(&err)
	name := arithNames[op] + "InPlace"
	shape, ok := broadcastShapes(t.shape(), o.shape())
	if !ok || !equalInts(shape, t.shape()) {
		return fmt.Errorf("tensor: %s: shape %v does not broadcast to %v", name, o.shape(), t.shape())
	}
	res, comp := arithDType(op, t.dtype, o.dtype)
	if category(res) > category(t.dtype) {
		return fmt.Errorf("tensor: %s: result %v cannot be stored in %v tensor", name, res, t.dtype)
	}
	if t.repeats() {
		return fmt.Errorf("tensor: %s: tensor of shape %v has strides %v that repeat elements", name, t.shape(), t.strides())
	}
	if comp != t.dtype || comp == Bool || o.st == t.st {
		// Compute out of place, then store (halves, bools, aliasing).
		r, err := t.arith(op, o)
		if err != nil {
			return err
		}
		if r.dtype != t.dtype {
			r = r.To(t.dtype)
		}
		return t.CopyFrom(r)
	}
	p, err := prepare(name, t, o, comp)
	if err != nil {
		return err
	}
	if comp == Float32 && (op == opAdd || op == opSub) && t.IsContiguous() && p.b.IsContiguous() && equalInts(p.b.shape(), t.shape()) {
		alpha := float32(1)
		if op == opSub {
			alpha = -1
		}
		axpy32(alpha, elems[float32](p.b)[:t.Numel()], elems[float32](t)[:t.Numel()])
		return nil
	}
	if comp == Float64 && t.IsContiguous() && p.b.IsContiguous() && equalInts(p.b.shape(), t.shape()) {
		n := t.Numel()
		dst, s := elems[float64](t)[:n], elems[float64](p.b)[:n]
		switch op {
		case opAdd:
			floats.Add(dst, s)
		case opSub:
			floats.Sub(dst, s)
		case opMul:
			floats.Mul(dst, s)
		default:
			floats.Div(dst, s)
		}
		return nil
	}
	switch comp {
	case Uint8:
		arithInPlace2[uint8](op, t, p)
	case Int8:
		arithInPlace2[int8](op, t, p)
	case Int16:
		arithInPlace2[int16](op, t, p)
	case Int32:
		arithInPlace2[int32](op, t, p)
	case Int64:
		arithInPlace2[int64](op, t, p)
	case Float32:
		arithInPlace2[float32](op, t, p)
	case Float64:
		arithInPlace2[float64](op, t, p)
	case Complex64:
		arithInPlace2[complex64](op, t, p)
	case Complex128:
		arithInPlace2[complex128](op, t, p)
	}
	return nil
}

func arithInPlace2[T number](op arithOp, t *Tensor, p *operands) {
	arithInPlaceRows(op, elems[T](t), elems[T](p.b), t.shape(), t.strides(), p.sb)
}

// axpy32 sets y to y + alpha*x through blas32.Axpy, in pieces whose length
// fits the int of a BLAS vector.
func axpy32(alpha float32, x, y []float32) {
	for len(y) > 0 {
		n := min(len(y), math.MaxInt32)
		blas32.Axpy(alpha, blas32.Vector{N: n, Inc: 1, Data: x[:n]}, blas32.Vector{N: n, Inc: 1, Data: y[:n]})
		x, y = x[n:], y[n:]
	}
}
