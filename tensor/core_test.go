package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHalfKnownBits(t *testing.T) {
	for _, c := range []struct {
		f  float32
		h  F16
		bf BF16
	}{
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{0.5, 0x3800, 0x3f00},
		{65504, 0x7bff, 0x4780}, // bf16 rounds 0x477fe000 up,
		{1e6, 0x7c00, 0x4974},
		{5.960464477539063e-08, 0x0001, 0x3380},
		{0, 0, 0},
	} {
		require.Equal(t, c.h, F16FromFloat32(c.f), "f16 of %v", c.f)
		require.Equal(t, c.bf, BF16FromFloat32(c.f), "bf16 of %v", c.f)
		if c.h != 0x7c00 {
			require.Equal(t, c.f, c.h.Float32())
		}
	}
	// Ties round to even: 1 + 2^-11 is halfway between 1 and 1+2^-10.
	require.Equal(t, F16(0x3c00), F16FromFloat32(1+1.0/2048))
	require.Equal(t, F16(0x3c02), F16FromFloat32(1+3.0/2048))
}

func TestSeedExpandContiguous(t *testing.T) {
	x := Ones(Float32, 2)
	e, err := x.Expand(1, 2)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, e.Shape())
	y := Ones(Float32, 2, 2)
	e2, err := y.Expand(1, 2, 2)
	require.NoError(t, err)
	c := e2.Contiguous()
	d, err := Data[float32](c)
	require.NoError(t, err)
	require.Equal(t, []float32{1, 1, 1, 1}, d)
	col, _ := FromSlice([]int64{1, 2}, 2, 1)
	ex, err := col.Expand(2, 3)
	require.NoError(t, err)
	require.False(t, ex.IsContiguous())
	v, _ := Data[int64](ex.Contiguous())
	require.Equal(t, []int64{1, 1, 1, 2, 2, 2}, v)
}

func TestDenseShares(t *testing.T) {
	x := Zeros(Float64, 2, 3)
	m, err := x.Dense()
	require.NoError(t, err)
	m.Set(1, 2, 7)
	d, _ := Data[float64](x)
	require.Equal(t, 7.0, d[5])
}

func TestCoreErrors(t *testing.T) {
	x := Zeros(Float32, 4)
	_, err := x.Reshape(1<<62, 1<<62, 4)
	require.EqualError(t, err, "tensor: Reshape: shape [4611686018427387904 4611686018427387904 4]: element count overflows")
	_, err = x.Reshape(3)
	require.EqualError(t, err, "tensor: Reshape: shape [3] has 3 elements, tensor [4] has 4")
	r, err := x.Reshape(-1, 2)
	require.NoError(t, err)
	require.Equal(t, []int{2, 2}, r.Shape())

	// Misaligned memory is refused by FromStorage and copied by FromBytes.
	buf := make([]byte, 17)
	st := StorageOf(buf[1:])
	_, err = FromStorage(Float64, st, 0, 2)
	require.EqualError(t, err, "tensor: FromStorage: storage memory is not aligned to 8 bytes for float64")
	y, err := FromBytes(Float64, buf[1:], 2)
	require.NoError(t, err)
	y.SetAt(1, 0)
	require.Equal(t, byte(0), buf[8], "misaligned input was copied")

	_, err = x.Expand(2, 3)
	require.EqualError(t, err, "tensor: Expand: cannot expand shape [4] to [2 3] (dimension 1 is 4, not 1)")
}

func TestFromBytesChecksBools(t *testing.T) {
	x, err := FromBytes(Bool, []byte{0, 1, 1}, 3)
	require.NoError(t, err)
	require.Equal(t, 2.0, x.Sum())
	_, err = FromBytes(Bool, []byte{0, 2}, 2)
	require.EqualError(t, err, "tensor: FromStorage: bool element 1 is byte 2, want 0 or 1")
}

func TestDimsShareNothingVisible(t *testing.T) {
	for _, shape := range [][]int{{}, {3}, {2, 1, 4}, {0, 5}} {
		x := newTensor(0, contiguousDims(shape), 0, nil)
		sh, st := x.shape(), x.strides()
		require.Equal(t, shape, sh)
		require.Equal(t, contiguousStrides(shape), st)
		require.Equal(t, len(sh), cap(sh), "an append to the shape must not write into the strides")
		grown := append(sh, 99)
		require.Len(t, grown, len(shape)+1)
		require.Equal(t, contiguousStrides(shape), x.strides())
		require.Equal(t, len(st), cap(st))
	}
}

// TestFromStorageInto builds views in caller-provided memory: the shape
// and strides land in dims when it has room for both, in a slice of the
// tensor's own otherwise, and a refused view leaves the tensor unchanged.
func TestFromStorageInto(t *testing.T) {
	st := NewStorage(64)
	for _, c := range []struct {
		name    string
		dims    []int
		off     int
		shape   []int
		inDims  bool
		wantErr bool
	}{
		{"in dims", make([]int, 4), 8, []int{2, 3}, true, false},
		{"dims too short", make([]int, 3), 0, []int{2, 3}, false, false},
		{"no dims", nil, 0, []int{4}, false, false},
		{"scalar", make([]int, 0), 16, nil, false, false},
		{"past the end", make([]int, 2), 64, []int{2}, false, true},
		{"misaligned", make([]int, 2), 4, []int{1}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v Tensor
			err := fromStorageInto(&v, c.dims, Float64, st, c.off, c.shape...)
			if c.wantErr {
				require.Error(t, err)
				assert.Equal(t, Tensor{}, v)
				return
			}
			require.NoError(t, err)
			want, err := FromStorage(Float64, st, c.off, c.shape...)
			require.NoError(t, err)
			assert.True(t, v.Equal(want))
			assert.Equal(t, want.Shape(), v.Shape())
			assert.Equal(t, c.off, v.Offset())
			if c.inDims {
				assert.Same(t, &c.dims[0], &v.shape()[0], "shape in dims")
				assert.Equal(t, []int{2, 3, 3, 1}, c.dims)
			} else if len(c.dims) > 0 {
				assert.NotSame(t, &c.dims[0], &v.shape()[0], "shape in a slice of its own")
			}
		})
	}
}
