package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReductionsEveryDType(t *testing.T) {
	for _, dt := range DTypes() {
		vals := []float64{3, 1, 4, 1, 5, 2}
		want := struct{ sum, mean, max, min float64 }{16, 16.0 / 6, 5, 1}
		if dt == Bool {
			vals = []float64{1, 0, 1, 1, 0, 1}
			want.sum, want.mean, want.max, want.min = 4, 4.0/6, 1, 0
		}
		x := of(t, dt, vals, 2, 3)
		assert.Equal(t, want.sum, x.Sum(), dt)
		assert.InDelta(t, want.mean, x.Mean(), 1e-12, dt)
		assert.Equal(t, want.max, x.Max(), dt)
		assert.Equal(t, want.min, x.Min(), dt)
		assert.Equal(t, complex(want.sum, 0), x.SumComplex(), dt)
		// On a non-contiguous view.
		tr, _ := x.Transpose(0, 1)
		assert.Equal(t, want.sum, tr.Sum(), dt)
		assert.Equal(t, want.max, tr.Max(), dt)
	}
}

func TestReductionsSpecial(t *testing.T) {
	empty := Zeros(Float32, 0)
	assert.Equal(t, 0.0, empty.Sum())
	assert.True(t, math.IsNaN(empty.Mean()))
	assert.True(t, math.IsNaN(empty.Max()))
	assert.True(t, math.IsNaN(empty.Min()))

	x := f64s(t, []float64{1, math.NaN(), 3}, 3)
	assert.True(t, math.IsNaN(x.Max()))
	assert.True(t, math.IsNaN(x.Min()))
	assert.True(t, math.IsNaN(x.Sum()))
	y := f64s(t, []float64{math.Inf(-1), 2}, 2)
	assert.Equal(t, 2.0, y.Max())
	assert.Equal(t, math.Inf(-1), y.Min())

	c, _ := FromSlice([]complex64{1 + 2i, 3 - 1i})
	assert.Equal(t, 4.0, c.Sum(), "real part")
	assert.Equal(t, complex(4, 1), c.SumComplex())
	assert.Equal(t, 2.0, c.Mean())
	assert.Equal(t, 3.0, c.Max(), "largest real part")

	// Expanded tensors sum every repeat; more than one conversion chunk.
	e, _ := of(t, Int16, []float64{2}, 1).Expand(3*convChunk + 5)
	assert.Equal(t, float64(2*(3*convChunk+5)), e.Sum())
	big, _ := Arange(Float32, 0, 5000, 1)
	assert.Equal(t, 4999.0, big.Max())
	assert.Equal(t, 0.0, big.Min())
	assert.Equal(t, 4999.0*5000/2, big.Sum())
}

func TestAllClose(t *testing.T) {
	a := f64s(t, []float64{1, 2, math.Inf(1)}, 3)
	b := f64s(t, []float64{1 + 1e-9, 2, math.Inf(1)}, 3)
	ok, err := a.AllClose(b, 1e-5, 1e-8)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = a.AllClose(f64s(t, []float64{1.1, 2, math.Inf(1)}, 3), 1e-5, 1e-8)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = a.AllClose(f64s(t, []float64{1, 2, math.Inf(-1)}, 3), 1e-5, 1e-8)
	require.NoError(t, err)
	assert.False(t, ok)
	nan := f64s(t, []float64{math.NaN()}, 1)
	ok, err = nan.AllClose(nan, 1, 1)
	require.NoError(t, err)
	assert.False(t, ok)
	// Across dtypes and with broadcasting: float16 rounding is within rtol 1e-3.
	h := f64s(t, []float64{0.1, 0.2}, 2).To(Float16)
	ok, err = h.AllClose(f64s(t, []float64{0.1, 0.2}, 1, 2), 1e-3, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	c, _ := FromSlice([]complex128{1 + 1i})
	ok, err = c.AllClose(c, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = a.AllClose(Ones(Float64, 2), 0, 0)
	require.EqualError(t, err, "tensor: AllClose: shapes [3] and [2] do not broadcast")
}
