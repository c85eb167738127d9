package tensor

import (
	"fmt"
	"math"
	"math/bits"
)

// Numel returns the number of elements of a tensor of the given shape, or an
// error if a dimension is negative or the product overflows an int (an
// error wrapping ErrNoMemory). Shapes that come from files or peers go
// through Numel before any allocation.
func Numel(shape []int) (int, error) {
	n := 1
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor: shape %v: dimension %d is negative", shape, i)
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > math.MaxInt {
			return 0, fmt.Errorf("tensor: shape %v: element count overflows an int: %w", shape, ErrNoMemory)
		}
		n = int(lo)
	}
	return n, nil
}

// NBytesOf returns the number of bytes a contiguous tensor of dtype dt and the
// given shape needs, or an error for a bad shape, an invalid dtype or an
// overflow (wrapping ErrNoMemory, as Numel's).
func NBytesOf(dt DType, shape []int) (int, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("tensor: invalid dtype %v", dt)
	}
	n, err := Numel(shape)
	if err != nil {
		return 0, err
	}
	hi, lo := bits.Mul64(uint64(n), uint64(dt.Size()))
	if hi != 0 || lo > math.MaxInt {
		return 0, fmt.Errorf("tensor: shape %v of %v: byte count overflows an int: %w", shape, dt, ErrNoMemory)
	}
	return int(lo), nil
}

// contiguousStrides returns the row-major strides, in elements, of shape.
func contiguousStrides(shape []int) []int {
	strides := make([]int, len(shape))
	fillStrides(strides, shape)
	return strides
}

// fillStrides writes the C-contiguous strides of shape into strides (of
// len(shape)).
func fillStrides(strides, shape []int) {
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = s
		if shape[i] > 1 {
			s *= shape[i]
		}
	}
}

// equalInts reports whether a and b hold the same values.
func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// contiguousDims returns shape and its C-contiguous strides in one slice,
// as a Tensor holds them.
func contiguousDims(shape []int) []int {
	dims := make([]int, 2*len(shape))
	fillContiguousDims(dims, shape)
	return dims
}

// fillContiguousDims writes shape, then its C-contiguous strides, into
// dims (2*len(shape) ints).
func fillContiguousDims(dims, shape []int) {
	n := copy(dims, shape)
	fillStrides(dims[n:2*n], shape)
}

// joinDims returns shape and strides in one slice, as a Tensor holds them.
func joinDims(shape, strides []int) []int {
	return append(append(make([]int, 0, 2*len(shape)), shape...), strides...)
}

// cloneInts returns a copy of s that is never nil.
func cloneInts(s []int) []int {
	return append(make([]int, 0, len(s)), s...)
}
