package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// f64s returns a float64 tensor of the given values and shape.
func f64s(t *testing.T, vals []float64, shape ...int) *Tensor {
	t.Helper()
	x, err := FromSlice(append([]float64(nil), vals...), shape...)
	require.NoError(t, err)
	return x
}

// of returns a tensor of dtype dt holding vals (converted) in the given shape.
func of(t *testing.T, dt DType, vals []float64, shape ...int) *Tensor {
	t.Helper()
	return f64s(t, vals, shape...).To(dt)
}

// values returns the elements of x in row-major order as float64 (real part).
func values(t *testing.T, x *Tensor) []float64 {
	t.Helper()
	d, err := Data[float64](x.To(Float64))
	require.NoError(t, err)
	return d
}

// bools returns the elements of a bool tensor in row-major order.
func bools(t *testing.T, x *Tensor) []bool {
	t.Helper()
	require.Equal(t, Bool, x.DType())
	d, err := Data[bool](x.Contiguous())
	require.NoError(t, err)
	return d
}

// iota64 returns 0, 1, ..., n-1 as float64.
func iota64(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}
