package tensor

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/floats"
)

// AddScalar returns t + v, element by element, in a new contiguous tensor. v
// acts as a Python number does in torch: floating tensors keep their dtype;
// integer tensors keep theirs when v is an integer their dtype holds (as
// torch's integer rule has it, an unsigned dtype also takes the negative
// of a value it holds, which wraps around: uint8 - 1 is uint8) and bool
// tensors become int64; otherwise v acts as a Python float and the result
// is float32. So int32 * 1e10 is float32, as t * 1e10 is in torch, and
// never a silent wrap of the scalar (elements still wrap around, as in
// torch: int32 2^30 * 4 is 0). It panics if t's storage was released.
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
	if dt == Bool {
		dt = Int64
	}
	if op == opDiv || v != math.Trunc(v) || checkScalar(dt, v) != nil {
		return Float32
	}
	return dt
}

// checkScalar returns an error if v cannot be converted to dtype dt
// without overflow, by torch's rule for a Python number (the "value cannot
// be converted to type int32 without overflow" of fill_, full and
// masked_fill): NaN and ±Inf fit only floating and complex dtypes, a
// finite v must lie within dt's range (for an integer v and an unsigned
// dt, its negative too: -1 fills uint8 with 255). Non-integer values are
// truncated toward zero into integer dtypes.
func checkScalar(dt DType, v float64) error {
	var lo, hi float64
	switch dt {
	case Bool, Float64, Complex128:
		return nil
	case Uint8:
		lo, hi = 0, math.MaxUint8
	case Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case Int16:
		lo, hi = math.MinInt16, math.MaxInt16
	case Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case Int64:
		lo, hi = -(1 << 63), math.Nextafter(1<<63, 0)
	case Float16:
		hi = 65504
	case BFloat16:
		hi = float64(math.Float32frombits(0x7f7f0000))
	case Float32, Complex64:
		hi = math.MaxFloat32
	}
	if dt.IsFloat() || dt.IsComplex() {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) <= hi {
			return nil
		}
	} else if v >= lo && v <= hi || dt == Uint8 && v < 0 && v >= -hi && v == math.Trunc(v) {
		return nil
	}
	return fmt.Errorf("value %v cannot be converted to %v without overflow", v, dt)
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
	out := mustAlloc(arithNames[op]+"Scalar", comp, t.shape(), true)
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
	arithRows(op, elems[T](out), elems[T](x), []T{v}, x.shape(), x.strides(), make([]int, len(x.shape())))
}

// AddScalarInPlace sets t to t + v, element by element. The result, of the
// dtype AddScalar gives, must fit t's dtype: an integer tensor takes only an
// integral v. It returns an error otherwise, if t repeats elements (an
// expanded view) or its storage was released.
func (t *Tensor) AddScalarInPlace(v float64) error { return t.arithScalarInPlace(opAdd, v) }

// SubScalarInPlace sets t to t - v, like AddScalarInPlace.
func (t *Tensor) SubScalarInPlace(v float64) error { return t.arithScalarInPlace(opSub, v) }

// MulScalarInPlace sets t to t * v, like AddScalarInPlace; contiguous
// float32 and float64 tensors are scaled by BLAS.
func (t *Tensor) MulScalarInPlace(v float64) error { return t.arithScalarInPlace(opMul, v) }

// DivScalarInPlace sets t to t / v, like AddScalarInPlace; t must be
// floating or complex (true division).
func (t *Tensor) DivScalarInPlace(v float64) error { return t.arithScalarInPlace(opDiv, v) }

func (t *Tensor) arithScalarInPlace(op arithOp, v float64) error {
	name := arithNames[op] + "ScalarInPlace"
	if err := t.st.checkLive(name); err != nil {
		return err
	}
	res := scalarDType(op, t.dtype, v)
	if category(res) > category(t.dtype) {
		return fmt.Errorf("tensor: %s: result %v of %v tensor and %v cannot be stored in %v tensor", name, res, t.dtype, v, t.dtype)
	}
	if t.repeats() {
		return fmt.Errorf("tensor: %s: tensor of shape %v has strides %v that repeat elements", name, t.shape(), t.strides())
	}
	n := t.Numel()
	if op == opMul && t.IsContiguous() && (t.dtype == Float32 || t.dtype == Float64) {
		if t.dtype == Float32 {
			scal32(float32(v), elems[float32](t)[:n])
		} else {
			floats.Scale(v, elems[float64](t)[:n])
		}
		return nil
	}
	zero := make([]int, len(t.shape()))
	switch t.dtype {
	case Uint8:
		arithInPlaceRows(op, elems[uint8](t), []uint8{uint8(int64(v))}, t.shape(), t.strides(), zero)
	case Int8:
		arithInPlaceRows(op, elems[int8](t), []int8{int8(int64(v))}, t.shape(), t.strides(), zero)
	case Int16:
		arithInPlaceRows(op, elems[int16](t), []int16{int16(int64(v))}, t.shape(), t.strides(), zero)
	case Int32:
		arithInPlaceRows(op, elems[int32](t), []int32{int32(int64(v))}, t.shape(), t.strides(), zero)
	case Int64:
		arithInPlaceRows(op, elems[int64](t), []int64{int64(v)}, t.shape(), t.strides(), zero)
	case Float32:
		arithInPlaceRows(op, elems[float32](t), []float32{float32(v)}, t.shape(), t.strides(), zero)
	case Float64:
		arithInPlaceRows(op, elems[float64](t), []float64{v}, t.shape(), t.strides(), zero)
	case Complex64:
		arithInPlaceRows(op, elems[complex64](t), []complex64{complex(float32(v), 0)}, t.shape(), t.strides(), zero)
	case Complex128:
		arithInPlaceRows(op, elems[complex128](t), []complex128{complex(v, 0)}, t.shape(), t.strides(), zero)
	default: // bool and halves: compute in the result dtype, store back
		return t.storeResult(name, t.arithScalar(op, v))
	}
	return nil
}

// scal32 scales x by alpha through blas32.Scal, in pieces whose length fits
// the int of a BLAS vector.
func scal32(alpha float32, x []float32) {
	for len(x) > 0 {
		n := min(len(x), math.MaxInt32)
		blas32.Scal(alpha, blas32.Vector{N: n, Inc: 1, Data: x[:n]})
		x = x[n:]
	}
}
