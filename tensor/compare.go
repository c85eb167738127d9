package tensor

import (
	"cmp"
	"math"
)

// cmpOp is an element-wise comparison.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpNames = [...]string{"Eq", "Ne", "Lt", "Le", "Gt", "Ge"}

// Eq returns the bool tensor of t == o, element by element. t and o broadcast
// against each other (see BroadcastShapes) and are compared in their promoted
// dtype (see PromoteTypes). NaN compares unequal to everything. It returns an
// error if the shapes do not broadcast or a storage was released.
func (t *Tensor) Eq(o *Tensor) (*Tensor, error) { return t.compare(opEq, o) }

// Ne returns the bool tensor of t != o, element by element, like Eq.
func (t *Tensor) Ne(o *Tensor) (*Tensor, error) { return t.compare(opNe, o) }

// Lt returns the bool tensor of t < o, element by element, like Eq. Complex
// numbers are ordered as numpy orders them: by real part, then by imaginary
// part. false < true.
func (t *Tensor) Lt(o *Tensor) (*Tensor, error) { return t.compare(opLt, o) }

// Le returns the bool tensor of t <= o, element by element, like Lt.
func (t *Tensor) Le(o *Tensor) (*Tensor, error) { return t.compare(opLe, o) }

// Gt returns the bool tensor of t > o, element by element, like Lt.
func (t *Tensor) Gt(o *Tensor) (*Tensor, error) { return t.compare(opGt, o) }

// Ge returns the bool tensor of t >= o, element by element, like Lt.
func (t *Tensor) Ge(o *Tensor) (*Tensor, error) { return t.compare(opGe, o) }

// compareDType returns the dtype in which elements of dtype dt are compared:
// halves widen to float32 (exactly), bools to uint8.
func compareDType(dt DType) DType {
	switch dt {
	case Float16, BFloat16:
		return Float32
	case Bool:
		return Uint8
	}
	return dt
}

func (t *Tensor) compare(op cmpOp, o *Tensor) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	dt := compareDType(PromoteTypes(t.dtype, o.dtype))
	p, err := prepare(cmpNames[op], t, o, dt)
	if err != nil {
		return nil, err
	}
	out := mustAlloc(cmpNames[op], Bool, p.shape, true)
	res := elems[bool](out)
	switch dt {
	case Uint8:
		cmp2[uint8](op, res, p)
	case Int8:
		cmp2[int8](op, res, p)
	case Int16:
		cmp2[int16](op, res, p)
	case Int32:
		cmp2[int32](op, res, p)
	case Int64:
		cmp2[int64](op, res, p)
	case Float32:
		cmp2[float32](op, res, p)
	case Float64:
		cmp2[float64](op, res, p)
	case Complex64:
		cmpComplex2[complex64](op, res, p, func(z complex64) (float64, float64) {
			return float64(real(z)), float64(imag(z))
		})
	case Complex128:
		cmpComplex2[complex128](op, res, p, func(z complex128) (float64, float64) {
			return real(z), imag(z)
		})
	}
	return out, nil
}

// cmp2 compares the prepared operands of an ordered type T.
func cmp2[T realNum](op cmpOp, out []bool, p *operands) {
	cmpRows(op, out, elems[T](p.a), elems[T](p.b), p.shape, p.sa, p.sb)
}

// cmpComplex2 compares complex operands lexicographically.
func cmpComplex2[T complex64 | complex128](op cmpOp, out []bool, p *operands, parts func(T) (float64, float64)) {
	map2(out, elems[T](p.a), elems[T](p.b), p.shape, p.sa, p.sb, func(x, y T) bool {
		xr, xi := parts(x)
		yr, yi := parts(y)
		return holdsComplex(op, xr, xi, yr, yi)
	})
}

// holds reports whether x op y. Comparisons involving NaN hold only for Ne.
func holds[T cmp.Ordered](op cmpOp, x, y T) bool {
	switch op {
	case opEq:
		return x == y
	case opNe:
		return x != y
	case opLt:
		return x < y
	case opLe:
		return x <= y
	case opGt:
		return x > y
	default:
		return x >= y
	}
}

// holdsComplex reports whether (xr, xi) op (yr, yi), ordering complex
// numbers by real part and then imaginary part.
func holdsComplex(op cmpOp, xr, xi, yr, yi float64) bool {
	switch op {
	case opEq:
		return xr == yr && xi == yi
	case opNe:
		return xr != yr || xi != yi
	}
	if math.IsNaN(xr) || math.IsNaN(xi) || math.IsNaN(yr) || math.IsNaN(yi) {
		return false
	}
	if xr != yr {
		return holds(op, xr, yr)
	}
	return holds(op, xi, yi)
}

// EqScalar returns the bool tensor of t == v, element by element. Integer
// elements are compared exactly with an integral v; other elements are
// compared as float64 (complex ones as complex128, v having no imaginary
// part; bools as 0 and 1). It panics if t's storage was released.
func (t *Tensor) EqScalar(v float64) *Tensor { return t.compareScalar(opEq, v) }

// NeScalar returns the bool tensor of t != v, like EqScalar.
func (t *Tensor) NeScalar(v float64) *Tensor { return t.compareScalar(opNe, v) }

// LtScalar returns the bool tensor of t < v, like EqScalar; complex elements
// are ordered as in Lt.
func (t *Tensor) LtScalar(v float64) *Tensor { return t.compareScalar(opLt, v) }

// LeScalar returns the bool tensor of t <= v, like LtScalar.
func (t *Tensor) LeScalar(v float64) *Tensor { return t.compareScalar(opLe, v) }

// GtScalar returns the bool tensor of t > v, like LtScalar.
func (t *Tensor) GtScalar(v float64) *Tensor { return t.compareScalar(opGt, v) }

// GeScalar returns the bool tensor of t >= v, like LtScalar.
func (t *Tensor) GeScalar(v float64) *Tensor { return t.compareScalar(opGe, v) }

func (t *Tensor) compareScalar(op cmpOp, v float64) *Tensor {
	out := mustAlloc(cmpNames[op]+"Scalar", Bool, t.shape(), true)
	res := elems[bool](out)
	x := t
	switch t.dtype {
	case Bool:
		// The bytes of a bool tensor are those of a uint8 tensor of 0 and 1.
		x = t.viewDims(t.allDims(), t.offset)
		x.dtype = Uint8
	case Float16, BFloat16:
		x = t.To(Float32)
	}
	integral := v >= -(1<<63) && v < 1<<63 && v == math.Trunc(v)
	switch x.dtype {
	case Uint8:
		cmpScalarInt[uint8](x, op, res, v, integral)
	case Int8:
		cmpScalarInt[int8](x, op, res, v, integral)
	case Int16:
		cmpScalarInt[int16](x, op, res, v, integral)
	case Int32:
		cmpScalarInt[int32](x, op, res, v, integral)
	case Int64:
		cmpScalarInt[int64](x, op, res, v, integral)
	case Float32:
		cmpRows(op, res, elems[float32](x), []float64{v}, x.shape(), x.strides(), make([]int, len(x.shape())))
	case Float64:
		cmpRows(op, res, elems[float64](x), []float64{v}, x.shape(), x.strides(), make([]int, len(x.shape())))
	case Complex64:
		map1(res, elems[complex64](x), x.shape(), x.strides(), func(z complex64) bool {
			return holdsComplex(op, float64(real(z)), float64(imag(z)), v, 0)
		})
	case Complex128:
		map1(res, elems[complex128](x), x.shape(), x.strides(), func(z complex128) bool {
			return holdsComplex(op, real(z), imag(z), v, 0)
		})
	}
	return out
}

// cmpScalarInt compares integer elements with v, exactly when v is integral.
func cmpScalarInt[T intNum](t *Tensor, op cmpOp, out []bool, v float64, integral bool) {
	zero := make([]int, len(t.shape()))
	if integral {
		cmpRows(op, out, elems[T](t), []int64{int64(v)}, t.shape(), t.strides(), zero)
		return
	}
	cmpRows(op, out, elems[T](t), []float64{v}, t.shape(), t.strides(), zero)
}

// Equal reports whether t and o have the same dtype, the same shape and equal
// elements (as Eq compares them: NaN is not equal to itself), like
// torch.equal. It is false if either storage was released.
func (t *Tensor) Equal(o *Tensor) bool {
	if t.dtype != o.dtype || !equalInts(t.shape(), o.shape()) {
		return false
	}
	e, err := t.Eq(o)
	return err == nil && e.All()
}

// All reports whether every element of t is true (nonzero; NaN counts as
// nonzero). It is true for an empty tensor. It panics if t's storage was
// released.
func (t *Tensor) All() bool {
	b := t.asBool()
	all := true
	visit(elems[bool](b), b.shape(), b.strides(), func(x bool) bool {
		all = x
		return x
	})
	return all
}

// Any reports whether some element of t is true (nonzero; NaN counts as
// nonzero). It is false for an empty tensor. It panics if t's storage was
// released.
func (t *Tensor) Any() bool {
	b := t.asBool()
	any := false
	visit(elems[bool](b), b.shape(), b.strides(), func(x bool) bool {
		any = x
		return !x
	})
	return any
}

// asBool returns t itself if it is a bool tensor, and t != 0 otherwise.
func (t *Tensor) asBool() *Tensor {
	if t.dtype == Bool {
		return t
	}
	return t.NeScalar(0)
}
