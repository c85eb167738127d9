package tensor

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// AddScalar returns t + v, element by element, in a new contiguous tensor. v
// acts as a Python number does in torch: floating tensors keep their dtype;
// integer tensors keep theirs when v is integral (bool tensors become int64)
// and become float32 otherwise. It panics if t's storage was released.
func (t *Tensor) AddScalar(v float64) *Tensor { return t.arithScalar(opAdd, v) }

// SubScalar returns t - v, element by element, like AddScalar. (A bool tensor
// is subtracted from as int64, where torch refuses.)
func (t *Tensor) SubScalar(v float64) *Tensor { return t.arithScalar(opSub, v) }

// MulScalar returns t * v, element by element, like AddScalar.
func (t *Tensor) MulScalar(v float64) *Tensor { return t.arithScalar(opMul, v) }

// DivScalar returns t / v, element by element, like AddScalar, except that
// bool and integer tensors always give float32 (true division).
func (t *Tensor) DivScalar(v float64) *Tensor { return t.arithScalar(opDiv, v) }

// scalarDType returns the result dtype of op between a tensor of dtype dt
// and the scalar v.
func scalarDType(op arithOp, dt DType, v float64) DType {
	if category(dt) >= 2 {
		return dt
	}
	if op == opDiv || v != math.Trunc(v) || math.IsInf(v, 0) {
		return Float32
	}
	if dt == Bool {
		return Int64
	}
	return dt
}

func (t *Tensor) arithScalar(op arithOp, v float64) *Tensor {
	res := scalarDType(op, t.dtype, v)
	comp := res
	if comp == Float16 || comp == BFloat16 {
		comp = Float32
	}
	x := t
	if x.dtype != comp {
		x = x.To(comp)
	}
	out := Empty(comp, t.shape...)
	if comp == Float64 && x.IsContiguous() && op != opDiv {
		n := out.Numel()
		dst, src := elems[float64](out)[:n], elems[float64](x)[:n]
		switch op {
		case opAdd:
			copy(dst, src)
			floats.AddConst(v, dst)
		case opSub:
			copy(dst, src)
			floats.AddConst(-v, dst)
		case opMul:
			floats.ScaleTo(dst, v, src)
		}
		return out
	}
	switch comp {
	case Uint8:
		arithScalar1(op, out, x, uint8(int64(v)))
	case Int8:
		arithScalar1(op, out, x, int8(int64(v)))
	case Int16:
		arithScalar1(op, out, x, int16(int64(v)))
	case Int32:
		arithScalar1(op, out, x, int32(int64(v)))
	case Int64:
		arithScalar1(op, out, x, int64(v))
	case Float32:
		arithScalar1(op, out, x, float32(v))
	case Float64:
		arithScalar1(op, out, x, v)
	case Complex64:
		arithScalar1(op, out, x, complex(float32(v), 0))
	case Complex128:
		arithScalar1(op, out, x, complex(v, 0))
	}
	if res != comp {
		out = out.To(res)
	}
	return out
}

func arithScalar1[T number](op arithOp, out, x *Tensor, v T) {
	arithRows(op, elems[T](out), elems[T](x), []T{v}, x.shape, x.strides, make([]int, len(x.shape)))
}
