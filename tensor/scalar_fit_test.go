package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScalarOverflowIsAnError checks that a scalar that does not fit a
// tensor's dtype is refused where torch raises ("value cannot be
// converted to type int32 without overflow"), instead of silently giving
// 0 or a wrapped value, and that the values torch accepts still convert.
func TestScalarOverflowIsAnError(t *testing.T) {
	for _, tc := range []struct {
		dt   DType
		v    float64
		want float64 // the element after Fill, when it fits
		bad  bool
	}{
		{Int32, math.Inf(1), 0, true},
		{Int32, math.Inf(-1), 0, true},
		{Int32, math.NaN(), 0, true},
		{Int32, 1e10, 0, true},
		{Int32, -2.5, -2, false},
		{Int32, math.MaxInt32, math.MaxInt32, false},
		{Int32, math.MaxInt32 + 1, 0, true},
		{Int8, -128, -128, false},
		{Int8, 128, 0, true},
		{Uint8, 255, 255, false},
		{Uint8, 256, 0, true},
		{Uint8, -1, 255, false}, // an integer wraps, as a Python int does in torch
		{Uint8, -0.5, 0, true},  // a float below 0 does not
		{Int64, -(1 << 63), -(1 << 63), false},
		{Int64, 1 << 63, 0, true},
		{Float16, 65504, 65504, false},
		{Float16, 1e10, 0, true},
		{Float16, math.Inf(-1), math.Inf(-1), false},
		{BFloat16, 1e39, 0, true},
		{Float32, 1e39, 0, true},
		{Float32, math.Inf(1), math.Inf(1), false},
		{Float64, 1e300, 1e300, false},
		{Bool, math.NaN(), 1, false},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.dt, tc.v), func(t *testing.T) {
			x := Zeros(tc.dt, 3)
			err := x.Fill(tc.v)
			m, merr := Zeros(tc.dt, 3).MaskedFill(Full(Bool, 1, 3), tc.v)
			p, perr := Zeros(tc.dt, 1).Pad([]int{1, 0}, tc.v)
			if tc.bad {
				require.Error(t, err, "Fill(%v)", tc.v)
				assert.Contains(t, err.Error(), "without overflow")
				assert.Equal(t, 0.0, x.At(0), "a refused Fill writes nothing")
				require.Error(t, merr, "MaskedFill(%v)", tc.v)
				require.Error(t, perr, "Pad(%v)", tc.v)
				r := recoverFrom(func() { Full(tc.dt, tc.v, 2) })
				_, isErr := r.(error)
				assert.True(t, isErr, "Full(%v, %v) panics with an error, got %v", tc.dt, tc.v, r)
				return
			}
			require.NoError(t, err, "Fill(%v)", tc.v)
			assert.Equal(t, tc.want, x.At(2))
			require.NoError(t, merr)
			assert.Equal(t, tc.want, m.At(1))
			require.NoError(t, perr)
			assert.Equal(t, tc.want, p.At(0))
			assert.Equal(t, tc.want, Full(tc.dt, tc.v, 1).At(0))
		})
	}
}

// TestScalarDTypes checks the dtype of an integer or bool tensor combined
// with a scalar: an integer the dtype holds keeps it (and elements wrap
// around, as in torch), any other value acts as a Python float (float32),
// so that a scalar is never wrapped silently; the in-place forms refuse a
// float32 result for an integer tensor, as torch's mul_ does.
func TestScalarDTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    *Tensor
		op   func(x *Tensor, v float64) *Tensor
		v    float64
		dt   DType
		want float64 // element 0
	}{
		{"int32*3", Full(Int32, 2, 2), (*Tensor).MulScalar, 3, Int32, 6},
		{"int32*1e10", Full(Int32, 2, 2), (*Tensor).MulScalar, 1e10, Float32, 2e10},
		{"int32*2^31", Full(Int32, 1, 2), (*Tensor).MulScalar, 1 << 31, Float32, 1 << 31},
		{"int32 2^30*4 wraps", Full(Int32, 1<<30, 2), (*Tensor).MulScalar, 4, Int32, 0},
		{"int8+200", Full(Int8, 1, 2), (*Tensor).AddScalar, 200, Float32, 201},
		{"uint8+-1", Full(Uint8, 0, 2), (*Tensor).AddScalar, -1, Uint8, 255},
		{"uint8-300", Full(Uint8, 0, 2), (*Tensor).SubScalar, 300, Float32, -300},
		{"bool+1", Full(Bool, 1, 2), (*Tensor).AddScalar, 1, Int64, 2},
		{"bool+1e19", Full(Bool, 1, 2), (*Tensor).AddScalar, 1e19, Float32, float64(float32(1e19))},
		{"int64*2", Full(Int64, 3, 2), (*Tensor).MulScalar, 2, Int64, 6},
		{"int16*2.5", Full(Int16, 2, 2), (*Tensor).MulScalar, 2.5, Float32, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.op(tc.x, tc.v)
			assert.Equal(t, tc.dt, r.DType())
			assert.Equal(t, tc.want, r.At(0))
		})
	}

	x := Full(Int32, 2, 2)
	err := x.MulScalarInPlace(1e10)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot be stored in int32")
	assert.Equal(t, 2.0, x.At(0), "a refused MulScalarInPlace writes nothing")
	require.NoError(t, x.MulScalarInPlace(3))
	assert.Equal(t, 6.0, x.At(1))
	require.Error(t, Full(Uint8, 1, 2).AddScalarInPlace(256))
}

// TestIntegerNegativePowers pins torch's integer pow: element-wise, a
// negative exponent gives 0 unless the base is 1 or -1 (torch's powi, no
// error); a negative scalar exponent is refused ("Integers to negative
// integer powers are not allowed"), in place too.
func TestIntegerNegativePowers(t *testing.T) {
	base, err := FromSlice([]int32{2, 1, -1, -1, 0, 3})
	require.NoError(t, err)
	exp, err := FromSlice([]int32{-1, -3, -3, -2, -1, 2})
	require.NoError(t, err)
	p, err := base.Pow(exp)
	require.NoError(t, err)
	assert.Equal(t, Int32, p.DType())
	assert.Equal(t, []float64{0, 1, -1, 1, 0, 9}, values(t, p))

	_, err = base.PowScalar(-1)
	require.ErrorContains(t, err, "integers to negative integer powers are not allowed")
	require.Error(t, base.PowScalarInPlace(-2))
	f, err := base.PowScalar(-0.5) // a float exponent gives a float result
	require.NoError(t, err)
	assert.Equal(t, Float32, f.DType())
}
