package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCopyFromBroadcastsAndConverts(t *testing.T) {
	x := Zeros(Int32, 2, 3)
	require.NoError(t, x.CopyFrom(f64s(t, []float64{1.9, -2.5, 3}, 3)))
	assert.Equal(t, []float64{1, -2, 3, 1, -2, 3}, values(t, x))
	require.ErrorContains(t, x.CopyFrom(Ones(Int32, 2)), "does not broadcast")
	// Overlapping source and destination in one storage.
	y := f64s(t, iota64(4), 4)
	lo, _ := y.Narrow(0, 0, 3)
	hi, _ := y.Narrow(0, 1, 3)
	require.NoError(t, hi.CopyFrom(lo))
	assert.Equal(t, []float64{0, 0, 1, 2}, values(t, y))
}

func TestFillZero(t *testing.T) {
	for _, dt := range DTypes() {
		x := of(t, dt, []float64{1, 1, 1, 1}, 2, 2)
		col, _ := x.Select(1, 1)
		require.NoError(t, col.Zero())
		assert.Equal(t, []float64{1, 0, 1, 0}, values(t, x), dt)
		require.NoError(t, x.Fill(1))
		assert.Equal(t, []float64{1, 1, 1, 1}, values(t, x), dt)
	}
	e, _ := Ones(Int8, 1).Expand(2)
	require.ErrorContains(t, e.Fill(0), "repeat elements")
}

func TestIndexPutMaskPut(t *testing.T) {
	for _, dt := range DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			x := Zeros(dt, 4, 2)
			require.NoError(t, x.IndexPut(0, []int{2, -1}, of(t, dt, []float64{1, 0, 0, 1}, 2, 2)))
			assert.Equal(t, []float64{0, 0, 0, 0, 1, 0, 0, 1}, values(t, x))
			mask, _ := FromSlice([]bool{true, false, false, true})
			require.NoError(t, x.MaskPut(mask, of(t, dt, []float64{1}, 1))) // broadcast
			assert.Equal(t, []float64{1, 1, 0, 0, 1, 0, 1, 1}, values(t, x))
			// Through a view: the transposed columns.
			v, _ := x.Transpose(0, 1)
			require.NoError(t, v.IndexPut(1, []int{1}, Zeros(dt, 2, 1)))
			assert.Equal(t, []float64{1, 1, 0, 0, 1, 0, 1, 1}, values(t, x))
		})
	}
	x := Zeros(Float32, 3)
	require.ErrorContains(t, x.IndexPut(0, []int{3}, Ones(Float32, 1)), "index 3 (position 0) out of range")
	require.ErrorContains(t, x.IndexPut(1, []int{0}, Ones(Float32, 1)), "dimension 1 out of range")
	require.ErrorContains(t, x.IndexPut(0, []int{0, 1}, Ones(Float32, 3)), "does not broadcast")
	mask, _ := FromSlice([]bool{true, true, false})
	require.ErrorContains(t, x.MaskPut(mask, Ones(Float32, 3)), "does not broadcast to [2]")
	require.ErrorContains(t, x.MaskPut(Ones(Int8, 3), Ones(Float32, 1)), "mask is int8")
	require.ErrorContains(t, x.MaskPut(Ones(Bool, 2), Ones(Float32, 1)), "does not match the leading dimensions")
	// Repeated indices: the last write wins.
	require.NoError(t, x.IndexPut(0, []int{0, 0}, f64s(t, []float64{1, 2}, 2)))
	assert.Equal(t, 2.0, x.At(0))
}

func TestPad(t *testing.T) {
	for _, dt := range DTypes() {
		x := of(t, dt, []float64{1, 1, 1, 1}, 2, 2)
		p, err := x.Pad([]int{1, 0, 0, 1}, 0) // last dim (1 before), first dim (1 after)
		require.NoError(t, err, dt)
		assert.Equal(t, []int{3, 3}, p.Shape())
		assert.Equal(t, []float64{0, 1, 1, 0, 1, 1, 0, 0, 0}, values(t, p), dt)
	}
	x := f64s(t, iota64(6), 2, 3)
	c, err := x.Pad([]int{-1, 2}, 9) // crop one in front of the last dim, pad two behind
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 2, 9, 9, 4, 5, 9, 9}, values(t, c))
	d, err := x.PadDims([]int{1}, []int{-2}, 7)
	require.NoError(t, err)
	assert.Equal(t, []float64{7, 7, 7}, values(t, d))
	_, err = x.Pad([]int{1}, 0)
	require.ErrorContains(t, err, "need pairs")
	_, err = x.Pad([]int{1, 1, 1, 1, 1, 1}, 0)
	require.ErrorContains(t, err, "need pairs")
	_, err = x.Pad([]int{-2, -2}, 0)
	require.ErrorContains(t, err, "has size -1")
	_, err = x.PadDims([]int{1}, []int{1, 1}, 0)
	require.ErrorContains(t, err, "PadDims")
}

// FuzzIndexArgs drives the index, shape and pad arguments of the view and
// write operations with arbitrary integers: none may panic.
func FuzzIndexArgs(f *testing.F) {
	f.Add(0, 1, 2, -1, 3)
	f.Add(-5, 100, 0, 7, -2)
	f.Fuzz(func(t *testing.T, a, b, c, d, e int) {
		x := f64s(t, iota64(24), 2, 3, 4)
		_, _ = x.Narrow(a, b, c)
		_, _ = x.Slice(a, b, c, d)
		_, _ = x.Select(a, b)
		_, _ = x.IndexSelect(a, []int{b, c})
		_, _ = x.Permute(a, b, c)
		_, _ = x.Transpose(a, b)
		_, _ = x.Reshape(a, b)
		_, _ = x.Expand(a, b, c, d)
		_, _ = x.Squeeze(a)
		_, _ = x.Unsqueeze(a)
		_, _ = x.SumDims([]int{a, b}, d > 0)
		_, _ = x.MaxDims([]int{a}, false)
		_ = x.IndexPut(a, []int{b, c}, Ones(Float64, 1))
		bound := func(v int) int { return v % 64 }
		_, _ = x.Pad([]int{bound(a), bound(b), bound(c), bound(d), bound(e), bound(e)}[:(uint(e)%4)*2], 1)
		_, _ = x.PadDims([]int{bound(a)}, []int{bound(b)}, 1)
		_, _ = Cat([]*Tensor{x, x}, a)
	})
}
