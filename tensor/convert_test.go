package tensor

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Small integers survive every conversion; bool keeps only zero or not.
func TestToEveryPair(t *testing.T) {
	vals := []float64{0, 1, 2, 3, 0, 5}
	for _, from := range DTypes() {
		src := of(t, from, vals, 2, 3)
		for _, to := range DTypes() {
			got := src.To(to)
			require.Equal(t, to, got.DType())
			require.Equal(t, []int{2, 3}, got.Shape())
			require.True(t, got.IsContiguous())
			want := vals
			if from == Bool || to == Bool {
				want = []float64{0, 1, 1, 1, 0, 1}
			}
			assert.Equal(t, want, values(t, got), "%v -> %v", from, to)
		}
	}
}

func TestToSameDTypeCopies(t *testing.T) {
	x := Ones(Float32, 3)
	y := x.To(Float32)
	assert.NotSame(t, x.Storage(), y.Storage())
	y.SetAt(5, 0)
	assert.Equal(t, 1.0, x.At(0))
}

func TestToRules(t *testing.T) {
	x := f64s(t, []float64{-1.7, 2.9, 300, math.NaN(), math.Copysign(0, -1), 1e6}, 6)
	assert.Equal(t, []bool{true, true, true, true, false, true}, bools(t, x.To(Bool)))
	head, err := x.Narrow(0, 0, 3)
	require.NoError(t, err)
	i8, err := Data[int8](head.To(Int8))
	require.NoError(t, err)
	assert.Equal(t, []int8{-1, 2, 44}, i8, "truncation toward zero, then wrap-around")
	u8, err := Data[uint8](f64s(t, []float64{-1, 256, 257}, 3).To(Uint8))
	require.NoError(t, err)
	assert.Equal(t, []uint8{255, 0, 1}, u8)
	h, err := Data[F16](x.To(Float16))
	require.NoError(t, err)
	assert.Equal(t, F16(0xbecd), h[0]) // -1.7 rounded to nearest even
	assert.Equal(t, F16(0x7c00), h[5]) // 1e6 overflows to +Inf
	bf, err := Data[BF16](x.To(BFloat16))
	require.NoError(t, err)
	assert.Equal(t, BF16(0xbfda), bf[0])
	assert.Equal(t, BF16(0x4974), bf[5])
	// Wide integers convert exactly between integer types.
	big, _ := FromSlice([]int64{math.MaxInt64, -1 << 40})
	i32, err := Data[int32](big.To(Int32))
	require.NoError(t, err)
	assert.Equal(t, []int32{-1, 0}, i32)
	// Complex to real keeps the real part; real to complex has no imaginary part.
	c, _ := FromSlice([]complex128{1.5 + 2i, -3i})
	assert.Equal(t, []float64{1.5, 0}, values(t, c.To(Float32)))
	z, err := Data[complex64](f64s(t, []float64{2}, 1).To(Complex64))
	require.NoError(t, err)
	assert.Equal(t, []complex64{2}, z)
	z2, err := Data[complex64](c.To(Complex64))
	require.NoError(t, err)
	assert.Equal(t, []complex64{1.5 + 2i, -3i}, z2)
}

func TestToOfView(t *testing.T) {
	x := of(t, Int16, iota64(6), 2, 3)
	tr, _ := x.Transpose(0, 1)
	assert.Equal(t, []float64{0, 3, 1, 4, 2, 5}, values(t, tr.To(Float16)))
	e, _ := of(t, Float32, []float64{7}, 1).Expand(5000)
	d, err := Data[F16](e.To(Float16))
	require.NoError(t, err)
	for _, v := range d {
		require.Equal(t, F16(0x4700), v)
	}
}

// Every dtype through every constructor.
func TestConstructorsEveryDType(t *testing.T) {
	for _, dt := range DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			es := dt.Size()
			z := Zeros(dt, 2, 3)
			assert.Equal(t, make([]float64, 6), values(t, z))
			assert.Equal(t, 6*es, z.NBytes())
			one := 1.0
			assert.Equal(t, []float64{one, one}, values(t, Ones(dt, 2)))
			assert.Equal(t, []float64{one}, values(t, Full(dt, 1, 1)))
			assert.Equal(t, 0, Empty(dt).Dim())
			assert.Equal(t, 1, Empty(dt).Numel())

			// FromBytes over little-endian bytes of the value 1.
			b := make([]byte, 2*es)
			encodeFloat(dt, 1, b[es:])
			x, err := FromBytes(dt, b, 2)
			require.NoError(t, err)
			assert.Equal(t, []float64{0, 1}, values(t, x))
			_, err = FromBytes(dt, b, 3)
			require.Error(t, err)

			// FromStorage at an aligned offset, and refusal of a misaligned one.
			st := NewStorage(4 * 16)
			y, err := FromStorage(dt, st, 16, 2)
			require.NoError(t, err)
			y.SetAt(1, 1)
			assert.Equal(t, []float64{0, 1}, values(t, y))
			if es > 1 {
				_, err = FromStorage(dt, st, 1, 2)
				require.Error(t, err)
			}
			_, err = FromStorage(dt, st, 56, 9)
			require.Error(t, err)

			// Arange in every dtype.
			a, err := Arange(dt, 0, 2, 1)
			require.NoError(t, err)
			assert.Equal(t, []float64{0, 1}, values(t, a))
		})
	}
}

func TestFromSliceEveryType(t *testing.T) {
	check := func(x *Tensor, err error, dt DType) {
		t.Helper()
		require.NoError(t, err)
		assert.Equal(t, dt, x.DType())
		assert.Equal(t, []int{2}, x.Shape())
	}
	x, err := FromSlice([]bool{true, false})
	check(x, err, Bool)
	x, err = FromSlice([]uint8{1, 2})
	check(x, err, Uint8)
	x, err = FromSlice([]int8{1, 2})
	check(x, err, Int8)
	x, err = FromSlice([]int16{1, 2})
	check(x, err, Int16)
	x, err = FromSlice([]int32{1, 2})
	check(x, err, Int32)
	x, err = FromSlice([]int64{1, 2})
	check(x, err, Int64)
	x, err = FromSlice([]F16{0x3c00, 0x4000})
	check(x, err, Float16)
	assert.Equal(t, []float64{1, 2}, values(t, x))
	x, err = FromSlice([]BF16{0x3f80, 0x4000})
	check(x, err, BFloat16)
	assert.Equal(t, []float64{1, 2}, values(t, x))
	x, err = FromSlice([]float32{1, 2})
	check(x, err, Float32)
	x, err = FromSlice([]float64{1, 2})
	check(x, err, Float64)
	x, err = FromSlice([]complex64{1, 2})
	check(x, err, Complex64)
	x, err = FromSlice([]complex128{1, 2})
	check(x, err, Complex128)
	_, err = FromSlice([]float64{1, 2}, 3)
	require.EqualError(t, err, "tensor: FromSlice: shape [3] has 3 elements, data has 2")
}

func TestFloat16BytesAreTorchLayout(t *testing.T) {
	x := f64s(t, []float64{1, -2, 0.5}, 3).To(Float16)
	b, err := x.Bytes()
	require.NoError(t, err)
	assert.Equal(t, []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}, b)
	y := f64s(t, []float64{1}, 1).To(BFloat16)
	b, err = y.Bytes()
	require.NoError(t, err)
	assert.Equal(t, uint16(0x3f80), binary.LittleEndian.Uint16(b))
}
