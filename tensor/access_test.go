package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAtSetAtEveryDType(t *testing.T) {
	for _, dt := range DTypes() {
		x := Zeros(dt, 2, 3)
		x.SetAt(1, 1, 2)
		x.SetAt(1, -1, 0)
		assert.Equal(t, 1.0, x.At(1, 2), dt)
		assert.Equal(t, 1.0, x.At(1, -3), dt)
		assert.Equal(t, 0.0, x.At(0, 0), dt)
		assert.Equal(t, []float64{0, 0, 0, 1, 0, 1}, values(t, x), dt)
		assert.Equal(t, complex(1, 0), x.AtComplex(1, 2), dt)
		// Through a view.
		tr, _ := x.Transpose(0, 1)
		assert.Equal(t, 1.0, tr.At(2, 1), dt)
	}
}

func TestAtPanicsOnBadIndex(t *testing.T) {
	x := Zeros(Float32, 2, 3)
	assert.PanicsWithValue(t, "tensor: At: index [2 0] out of range for shape [2 3]", func() { x.At(2, 0) })
	assert.PanicsWithValue(t, "tensor: SetAt: 1 indices [0] for shape [2 3]", func() { x.SetAt(1, 0) })
	assert.PanicsWithValue(t, "tensor: Get: float32 tensor read as float64", func() { Get[float64](x, 0, 0) })
}

func TestGetPut(t *testing.T) {
	h := Zeros(Float16, 2)
	Put(h, F16(0x3c00), 1)
	assert.Equal(t, F16(0x3c00), Get[F16](h, 1))
	assert.Equal(t, 1.0, h.At(1))
	c := Zeros(Complex64, 1)
	c.SetAtComplex(2-3i, 0)
	assert.Equal(t, complex64(2-3i), Get[complex64](c, 0))
	assert.Equal(t, 2.0, c.At(0))
	i := Zeros(Int64, 1)
	Put(i, int64(1)<<60, 0)
	assert.Equal(t, int64(1)<<60, Get[int64](i, 0))
	s := Zeros(Float64)
	s.SetAt(4.5)
	assert.Equal(t, 4.5, s.At())
}

func TestArange(t *testing.T) {
	x, err := Arange(Float64, 0, 1, 0.25)
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 0.25, 0.5, 0.75}, values(t, x))
	x, err = Arange(Int64, 5, 0, -2)
	require.NoError(t, err)
	assert.Equal(t, []float64{5, 3, 1}, values(t, x))
	x, err = Arange(Int32, 3, 3, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, x.Shape())
	_, err = Arange(Float32, 0, 1, 0)
	require.EqualError(t, err, "tensor: Arange: step 0 cannot go from 0 to 1")
	_, err = Arange(Float32, 0, 1, -1)
	require.Error(t, err)
	_, err = Arange(Float32, 0, 1e300, 1)
	require.Error(t, err)
}
