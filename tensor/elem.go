package tensor

import "unsafe"

// F16 is an IEEE 754 half-precision number (dtype Float16), stored as its
// bit pattern.
type F16 uint16

// BF16 is a bfloat16 number (dtype BFloat16: the upper half of a float32),
// stored as its bit pattern.
type BF16 uint16

// Elem is the set of Go types that can back a Tensor. Each maps to exactly one
// DType (see DTypeOf).
type Elem interface {
	bool | uint8 | int8 | int16 | int32 | int64 |
		F16 | BF16 | float32 | float64 | complex64 | complex128
}

// DTypeOf returns the DType whose elements are stored as Go values of type T.
func DTypeOf[T Elem]() DType {
	var z T
	switch any(z).(type) {
	case bool:
		return Bool
	case uint8:
		return Uint8
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case F16:
		return Float16
	case BF16:
		return BFloat16
	case float32:
		return Float32
	case float64:
		return Float64
	case complex64:
		return Complex64
	default: // complex128: the type set is closed
		return Complex128
	}
}

// asBytes returns the memory of s as a byte slice sharing it.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// fromBytes returns b as a slice of n values of type T sharing its memory. The
// caller has checked the length and alignment.
func fromBytes[T Elem](b []byte, n int) []T {
	if n == 0 {
		return []T{}
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
