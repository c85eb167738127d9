package tensor

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStringGolden(t *testing.T) {
	arange := func(dt DType, n int, shape ...int) *Tensor { return arangeOf(t, dt, n, shape...) }
	scalar := func(dt DType, v float64) *Tensor { return scalarOf(t, dt, v) }
	c64, _ := FromSlice([]complex64{1 + 2i, 3 - 1i})
	c128, _ := FromSlice([]complex128{0.5 + 1i})
	expanded, err := Ones(Int8, 3).Expand(2, 3)
	require.NoError(t, err)
	transposed, err := arange(Int32, 6, 2, 3).Transpose(0, 1)
	require.NoError(t, err)
	column, err := arange(Int64, 6, 2, 3).Select(1, 1)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		x    *Tensor
		want string
	}{
		{"ones 2x2", Ones(Float32, 2, 2), "float32[2 2] [[1 1] [1 1]]"},
		{"float64", of(t, Float64, []float64{0.1, -2.5, 100}, 3), "float64[3] [0.1 -2.5 100]"},
		{"float32 shortest", of(t, Float32, []float64{0.1, 1.0 / 3}, 2), "float32[2] [0.1 0.33333334]"},
		{"large and small", of(t, Float32, []float64{1e6, 1e-5, 123456}, 3), "float32[3] [1e+06 1e-05 123456]"},
		{"non-finite", of(t, Float64, []float64{math.NaN(), math.Inf(1), math.Inf(-1)}, 3), "float64[3] [NaN +Inf -Inf]"},
		// 65504, the largest float16, is the float16 nearest 65500, as numpy prints it.
		{"float16 shortest", of(t, Float16, []float64{0.1, -2, 65504}, 3), "float16[3] [0.1 -2 65500]"},
		{"bfloat16 shortest", of(t, BFloat16, []float64{0.1, 3.14159, 1e10}, 3), "bfloat16[3] [0.1 3.14 1e+10]"},
		{"float16 non-finite", of(t, Float16, []float64{math.Inf(-1), math.NaN(), 0}, 3), "float16[3] [-Inf NaN 0]"},
		{"int64", of(t, Int64, []float64{-5, 10}, 2), "int64[2] [-5 10]"},
		{"uint8", arange(Uint8, 3), "uint8[3] [0 1 2]"},
		{"bool", of(t, Bool, []float64{1, 0}, 2), "bool[2] [true false]"},
		{"complex64", c64, "complex64[2] [(1+2i) (3-1i)]"},
		{"complex128", c128, "complex128[1] [(0.5+1i)]"},
		{"scalar", scalar(Float32, 3.5), "float32[] 3.5"},
		{"bool scalar", scalar(Bool, 1), "bool[] true"},
		{"empty", Zeros(Float32, 0), "float32[0] []"},
		{"empty rows", Zeros(Float32, 2, 0), "float32[2 0] [[] []]"},
		{"no rows", Zeros(Bool, 0, 3), "bool[0 3] []"},
		{"3-D", arange(Float32, 8, 2, 2, 2), "float32[2 2 2] [[[0 1] [2 3]] [[4 5] [6 7]]]"},
		{"expanded view", expanded, "int8[2 3] [[1 1 1] [1 1 1]]"},
		{"transposed view", transposed, "int32[3 2] [[0 3] [1 4] [2 5]]"},
		{"strided view", column, "int64[2] [1 4]"},
		{"1000 elements in full", Zeros(Int16, 1000), "int16[1000] [" + repeatZeros(1000) + "]"},
		{"summarized", arange(Int64, 10000), "int64[10000] [0 1 2 ... 9997 9998 9999]"},
		{"summarized rows", arange(Int64, 2002, 1001, 2), "int64[1001 2] [[0 1] [2 3] [4 5] ... [1996 1997] [1998 1999] [2000 2001]]"},
		{"summarized inner", Zeros(Float32, 2, 1000), "float32[2 1000] [[0 0 0 ... 0 0 0] [0 0 0 ... 0 0 0]]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.x.String())
			assert.Equal(t, c.want, fmt.Sprint(c.x), "fmt.Print uses String")
		})
	}
}

// arangeOf returns 0, 1, ..., n-1 as dtype dt in the given shape ([n] if
// none is given).
func arangeOf(t *testing.T, dt DType, n int, shape ...int) *Tensor {
	t.Helper()
	if len(shape) == 0 {
		shape = []int{n}
	}
	return of(t, dt, iota64(n), shape...)
}

// scalarOf returns the 0-D tensor of dtype dt holding v.
func scalarOf(t *testing.T, dt DType, v float64) *Tensor {
	t.Helper()
	x, err := of(t, dt, []float64{v}, 1).Reshape()
	require.NoError(t, err)
	return x
}

// repeatZeros returns n zeros separated by spaces.
func repeatZeros(n int) string {
	b := make([]byte, 0, 2*n)
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, '0')
	}
	return string(b)
}

func TestStringReleased(t *testing.T) {
	st := NewExternalStorage(make([]byte, 8), nil, nil)
	x, err := FromStorage(Float32, st, 0, 2)
	require.NoError(t, err)
	require.NoError(t, st.Release())
	assert.Equal(t, "float32[2] <released>", x.String())
	elems, more := x.FormatElements(2)
	assert.Nil(t, elems)
	assert.False(t, more)
}

// Every float16 and bfloat16 value prints in a form that parses back to
// the same value, in no more digits than that takes.
func TestStringHalfRoundTrip(t *testing.T) {
	for _, c := range []struct {
		dt    DType
		value func(bits uint16) float32
		round func(float32) float32
	}{
		{Float16, func(b uint16) float32 { return F16(b).Float32() }, func(f float32) float32 { return F16FromFloat32(f).Float32() }},
		{BFloat16, func(b uint16) float32 { return BF16(b).Float32() }, func(f float32) float32 { return BF16FromFloat32(f).Float32() }},
	} {
		bad := 0
		for b := range 1 << 16 {
			v := c.value(uint16(b))
			if v != v || math.IsInf(float64(v), 0) {
				continue
			}
			s := formatScalar(c.dt, scalar{re: float64(v)})
			x, err := strconv.ParseFloat(s, 32)
			if err != nil || c.round(float32(x)) != v {
				bad++
				if bad < 5 {
					t.Errorf("%v bits %#04x (%v) prints %q, which reads back as %v", c.dt, b, v, s, x)
				}
			}
		}
		assert.Zero(t, bad, "%v values that do not round-trip", c.dt)
	}
}

func TestFormatElements(t *testing.T) {
	x := of(t, Float32, iota64(6), 2, 3)
	xt, err := x.Transpose(0, 1)
	require.NoError(t, err)
	b, err := of(t, Bool, []float64{1}, 1).Reshape()
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		x    *Tensor
		n    int
		want []string
		more bool
	}{
		{"first four", x, 4, []string{"0", "1", "2", "3"}, true},
		{"all", x, 6, []string{"0", "1", "2", "3", "4", "5"}, false},
		{"more than all", x, 100, []string{"0", "1", "2", "3", "4", "5"}, false},
		{"none", x, 0, []string{}, true},
		{"negative", x, -1, []string{}, true},
		{"row-major order of a view", xt, 6, []string{"0", "3", "1", "4", "2", "5"}, false},
		{"scalar", b, 3, []string{"true"}, false},
		{"empty", Zeros(Int64, 0, 2), 3, []string{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, more := c.x.FormatElements(c.n)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.more, more)
		})
	}
}
