package tensor

import (
	"fmt"
	"unsafe"
)

// elemOffset returns the byte offset in t's storage of the element at idx.
// Negative indices count from the end. It panics if the number of indices is
// not t.Dim() or an index is out of range: indexing is the caller's
// arithmetic, not data.
func (t *Tensor) elemOffset(op string, idx []int) int {
	shape, strides := t.shape(), t.strides()
	if len(idx) != len(shape) {
		panic(fmt.Sprintf("tensor: %s: %d indices %v for shape %v", op, len(idx), idx, shape))
	}
	off := 0
	for k, i := range idx {
		n := shape[k]
		j := i
		if j < 0 {
			j += n
		}
		if j < 0 || j >= n {
			panic(fmt.Sprintf("tensor: %s: index %v out of range for shape %v", op, idx, shape))
		}
		off += j * strides[k]
	}
	return t.offset + off*t.dtype.Size()
}

// ptr returns a pointer to the element of type T at byte offset off.
func ptr[T Elem](t *Tensor, off int) *T {
	var z T
	b := t.st.Bytes()[off : off+int(unsafe.Sizeof(z))]
	return (*T)(unsafe.Pointer(unsafe.SliceData(b)))
}

// At returns the element of t at the given indices, one per dimension
// (negative ones count from the end), converted to float64: bools are 0 or 1,
// complex numbers give their real part (see AtComplex). It panics if the
// indices do not match t's shape or t's storage was released.
func (t *Tensor) At(idx ...int) float64 {
	off := t.elemOffset("At", idx)
	switch t.dtype {
	case Bool:
		return b2f(*ptr[bool](t, off))
	case Uint8:
		return float64(*ptr[uint8](t, off))
	case Int8:
		return float64(*ptr[int8](t, off))
	case Int16:
		return float64(*ptr[int16](t, off))
	case Int32:
		return float64(*ptr[int32](t, off))
	case Int64:
		return float64(*ptr[int64](t, off))
	case Float16:
		return float64(ptr[F16](t, off).Float32())
	case BFloat16:
		return float64(ptr[BF16](t, off).Float32())
	case Float32:
		return float64(*ptr[float32](t, off))
	case Float64:
		return *ptr[float64](t, off)
	case Complex64:
		return float64(real(*ptr[complex64](t, off)))
	default:
		return real(*ptr[complex128](t, off))
	}
}

// SetAt stores v, converted to t's dtype as Full converts it, at the given
// indices. It panics like At.
func (t *Tensor) SetAt(v float64, idx ...int) {
	off := t.elemOffset("SetAt", idx)
	es := t.dtype.Size()
	encodeFloat(t.dtype, v, t.st.Bytes()[off:off+es])
}

// AtComplex returns the element at the given indices as a complex128, for
// any dtype. It panics like At.
func (t *Tensor) AtComplex(idx ...int) complex128 {
	off := t.elemOffset("AtComplex", idx)
	switch t.dtype {
	case Complex64:
		return complex128(*ptr[complex64](t, off))
	case Complex128:
		return *ptr[complex128](t, off)
	}
	return complex(t.At(idx...), 0)
}

// SetAtComplex stores v at the given indices of a complex tensor; a real
// tensor takes v's real part. It panics like At.
func (t *Tensor) SetAtComplex(v complex128, idx ...int) {
	off := t.elemOffset("SetAtComplex", idx)
	switch t.dtype {
	case Complex64:
		*ptr[complex64](t, off) = complex64(v)
	case Complex128:
		*ptr[complex128](t, off) = v
	default:
		t.SetAt(real(v), idx...)
	}
}

// Get returns the element of t at the given indices as its own Go type T. It
// panics if T does not store t's dtype, or like At.
func Get[T Elem](t *Tensor, idx ...int) T {
	if dt := DTypeOf[T](); dt != t.dtype {
		panic(fmt.Sprintf("tensor: Get: %v tensor read as %v", t.dtype, dt))
	}
	return *ptr[T](t, t.elemOffset("Get", idx))
}

// Put stores v at the given indices of t. It panics if T does not store t's
// dtype, or like At.
func Put[T Elem](t *Tensor, v T, idx ...int) {
	if dt := DTypeOf[T](); dt != t.dtype {
		panic(fmt.Sprintf("tensor: Put: %v stored into %v tensor", dt, t.dtype))
	}
	*ptr[T](t, t.elemOffset("Put", idx)) = v
}
