package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSelect(t *testing.T) {
	x := f64s(t, iota64(24), 2, 3, 4)
	for _, c := range []struct {
		dim, i int
		shape  []int
		want   []float64
	}{
		{0, 1, []int{3, 4}, iota64(24)[12:]},
		{0, -2, []int{3, 4}, iota64(24)[:12]},
		{1, 2, []int{2, 4}, []float64{8, 9, 10, 11, 20, 21, 22, 23}},
		{-1, 0, []int{2, 3}, []float64{0, 4, 8, 12, 16, 20}},
		{2, -1, []int{2, 3}, []float64{3, 7, 11, 15, 19, 23}},
	} {
		s, err := x.Select(c.dim, c.i)
		require.NoError(t, err)
		assert.Equal(t, c.shape, s.Shape())
		assert.Equal(t, c.want, values(t, s), "Select(%d, %d)", c.dim, c.i)
		assert.Same(t, x.Storage(), s.Storage(), "a view")
	}
	_, err := x.Select(1, 3)
	require.EqualError(t, err, "tensor: Select: index 3 out of range for dimension 1 of shape [2 3 4]")
	_, err = x.Select(3, 0)
	require.EqualError(t, err, "tensor: Select: dimension 3 out of range for shape [2 3 4]")
	v, _ := FromSlice([]int16{5, 6})
	s, err := v.Select(0, 1)
	require.NoError(t, err)
	assert.Equal(t, 0, s.Dim())
	assert.Equal(t, 6.0, values(t, s)[0])
}

func TestNarrow(t *testing.T) {
	x := f64s(t, iota64(12), 3, 4)
	n, err := x.Narrow(1, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 2, 5, 6, 9, 10}, values(t, n))
	n, err = x.Narrow(0, -1, 1)
	require.NoError(t, err)
	assert.Equal(t, []float64{8, 9, 10, 11}, values(t, n))
	assert.True(t, n.IsContiguous())
	n, err = x.Narrow(0, 3, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 4}, n.Shape())
	_, err = x.Narrow(1, 3, 2)
	require.EqualError(t, err, "tensor: Narrow: start 3 length 2 out of range for dimension 1 of shape [3 4]")
}

func TestSliceSteps(t *testing.T) {
	x := f64s(t, iota64(10), 10)
	for _, c := range []struct {
		start, stop, step int
		want              []float64
	}{
		{0, math.MaxInt, 1, iota64(10)},
		{0, 10, 3, []float64{0, 3, 6, 9}},
		{1, 10, 3, []float64{1, 4, 7}},
		{-3, math.MaxInt, 1, []float64{7, 8, 9}},
		{-100, 2, 1, []float64{0, 1}},
		{2, -2, 2, []float64{2, 4, 6}},
		{5, 3, 1, []float64{}},
		{8, 100, 5, []float64{8}},
		{10, 12, 1, []float64{}},
	} {
		s, err := x.Slice(0, c.start, c.stop, c.step)
		require.NoError(t, err)
		assert.Equal(t, c.want, values(t, s), "[%d:%d:%d]", c.start, c.stop, c.step)
	}
	_, err := x.Slice(0, 0, 5, 0)
	require.EqualError(t, err, "tensor: Slice: step 0 must be positive")

	// Slices of slices, on an inner dimension, then made contiguous.
	m := f64s(t, iota64(20), 4, 5)
	s, err := m.Slice(1, 0, 5, 2)
	require.NoError(t, err)
	s, err = s.Slice(0, 1, 4, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, s.Shape())
	assert.False(t, s.IsContiguous())
	assert.Equal(t, []float64{5, 7, 9, 15, 17, 19}, values(t, s))
	assert.True(t, s.Contiguous().IsContiguous())
}

func TestIndexSelect(t *testing.T) {
	for _, dt := range DTypes() {
		x := of(t, dt, []float64{0, 1, 1, 0, 1, 1}, 3, 2)
		got, err := x.IndexSelect(0, []int{2, -3, 2})
		require.NoError(t, err, dt)
		assert.Equal(t, []int{3, 2}, got.Shape())
		assert.Equal(t, []float64{1, 1, 0, 1, 1, 1}, values(t, got), dt)
		assert.Equal(t, dt, got.DType())
	}
	x := f64s(t, iota64(6), 2, 3)
	got, err := x.IndexSelect(1, []int{2, 0})
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 0, 5, 3}, values(t, got))
	got, err = x.IndexSelect(1, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, got.Shape())
	_, err = x.IndexSelect(1, []int{0, 3})
	require.EqualError(t, err, "tensor: IndexSelect: index 3 (position 1) out of range for dimension 1 of shape [2 3]")
}

func TestMaskSelect(t *testing.T) {
	x := f64s(t, iota64(24), 2, 3, 4)
	m2, _ := FromSlice([]bool{true, false, true, false, false, true}, 2, 3)
	got, err := x.MaskSelect(m2)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4}, got.Shape())
	assert.Equal(t, []float64{0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23}, values(t, got))

	m1, _ := FromSlice([]bool{false, true})
	got, err = x.MaskSelect(m1)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3, 4}, got.Shape())
	assert.Equal(t, iota64(24)[12:], values(t, got))

	// A full-shape mask flattens everything; the tensor may be a view.
	tr, _ := x.Transpose(0, 2) // 4x3x2
	full := tr.GtScalar(20)
	got, err = tr.MaskSelect(full)
	require.NoError(t, err)
	assert.Equal(t, []float64{21, 22, 23}, values(t, got))

	// Mask from a comparison on an expanded tensor.
	e, _ := f64s(t, []float64{1, 2}, 2, 1).Expand(2, 3)
	got, err = e.MaskSelect(e.EqScalar(2))
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 2, 2}, values(t, got))

	none, _ := FromSlice([]bool{false, false})
	got, err = x.MaskSelect(none)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 3, 4}, got.Shape())

	_, err = x.MaskSelect(m2.To(Uint8))
	require.EqualError(t, err, "tensor: MaskSelect: mask is uint8, need bool")
	_, err = x.MaskSelect(Ones(Bool, 3))
	require.EqualError(t, err, "tensor: MaskSelect: mask shape [3] does not match the leading dimensions of shape [2 3 4]")
}

func TestStackUnbindRoundTrip(t *testing.T) {
	for _, dt := range DTypes() {
		a := of(t, dt, []float64{1, 0, 1, 1, 0, 0}, 2, 3)
		b := of(t, dt, []float64{0, 0, 1, 0, 1, 1}, 2, 3)
		for dim := -3; dim <= 2; dim++ {
			s, err := Stack([]*Tensor{a, b}, dim)
			require.NoError(t, err)
			d := dim
			if d < 0 {
				d += 3
			}
			want := []int{2, 3}
			want = append(want[:d], append([]int{2}, want[d:]...)...)
			assert.Equal(t, want, s.Shape(), "%v dim %d", dt, dim)
			parts, err := s.Unbind(dim)
			require.NoError(t, err)
			require.Len(t, parts, 2)
			assert.True(t, parts[0].Equal(a), "%v dim %d", dt, dim)
			assert.True(t, parts[1].Equal(b), "%v dim %d", dt, dim)
			assert.Same(t, s.Storage(), parts[1].Storage())
		}
	}
	_, err := Stack(nil, 0)
	require.EqualError(t, err, "tensor: Stack: no tensors")
	_, err = Stack([]*Tensor{Ones(Float32, 2), Ones(Float32, 3)}, 0)
	require.EqualError(t, err, "tensor: Stack: tensor 1 is float32[3], tensor 0 is float32[2]")
	_, err = Stack([]*Tensor{Ones(Float32, 2)}, 2)
	require.EqualError(t, err, "tensor: Stack: dimension 2 out of range for shape [2]")
}

func TestCat(t *testing.T) {
	a := f64s(t, iota64(4), 2, 2)
	b := f64s(t, []float64{9, 9}, 2, 1)
	c, err := Cat([]*Tensor{a, b}, 1)
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 1, 9, 2, 3, 9}, values(t, c))
	_, err = Cat([]*Tensor{a, b}, 0)
	require.EqualError(t, err, "tensor: Cat: tensor 1 is float64[2 1], tensor 0 is float64[2 2] (only dimension 0 may differ)")
}

func TestSqueezePermute(t *testing.T) {
	x := f64s(t, iota64(6), 2, 3)
	u, err := x.Unsqueeze(1)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1, 3}, u.Shape())
	assert.True(t, u.IsContiguous())
	u, err = x.Unsqueeze(-1)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 1}, u.Shape())
	s, err := u.Squeeze(-1)
	require.NoError(t, err)
	assert.True(t, s.Equal(x))
	s, err = u.Squeeze(0)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 1}, s.Shape())
	p, err := u.Permute(2, 1, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3, 2}, p.Shape())
	assert.Equal(t, []float64{0, 3, 1, 4, 2, 5}, values(t, p))
	_, err = u.Permute(0, 0, 1)
	require.EqualError(t, err, "tensor: Permute: dimension 0 repeated in [0 0 1]")
}

func TestExpandThenContiguousEveryDType(t *testing.T) {
	for _, dt := range DTypes() {
		col := of(t, dt, []float64{0, 1}, 2, 1)
		e, err := col.Expand(3, 2, 4)
		require.NoError(t, err)
		assert.False(t, e.IsContiguous())
		c := e.Contiguous()
		assert.True(t, c.IsContiguous())
		want := []float64{0, 0, 0, 0, 1, 1, 1, 1}
		want = append(append(append([]float64{}, want...), want...), want...)
		assert.Equal(t, want, values(t, c), dt)
		_, err = e.Bytes()
		require.Error(t, err)
		b, err := c.Bytes()
		require.NoError(t, err)
		assert.Len(t, b, 24*dt.Size())
		// Writing through a repeating view is refused.
		require.Error(t, e.CopyFrom(c))
	}
}

func TestViewsOfEmptyTensors(t *testing.T) {
	x := Zeros(Float32, 2, 0)
	s, err := x.Select(0, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, s.Shape())
	b, err := s.Bytes()
	require.NoError(t, err)
	assert.Empty(t, b)
	d, err := Data[float32](s)
	require.NoError(t, err)
	assert.Empty(t, d)
	assert.Equal(t, []int{0}, s.Clone().Shape())
	got, err := x.IndexSelect(0, []int{1, 1})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, got.Shape())
	got, err = x.MaskSelect(Ones(Bool, 2))
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, got.Shape())
	assert.Equal(t, []int{0}, s.EqScalar(1).Shape())
	got, err = Stack([]*Tensor{s, s}, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0}, got.Shape())
	got, err = s.Add(s)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, got.Shape())
	assert.Equal(t, 0.0, s.Sum())
	assert.Equal(t, "float32[0] []", s.String())
	n, err := f64s(t, iota64(4), 4).Narrow(0, 4, 0)
	require.NoError(t, err)
	assert.Equal(t, "float64[0] []", n.To(Float64).String())
}

func TestViewsEveryDType(t *testing.T) {
	vals := []float64{0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0}
	for _, dt := range DTypes() {
		x := of(t, dt, vals, 3, 4)
		s, err := x.Select(1, 2)
		require.NoError(t, err)
		assert.Equal(t, []float64{1, 0, 1}, values(t, s), dt)
		n, err := x.Narrow(0, 1, 2)
		require.NoError(t, err)
		assert.Equal(t, vals[4:], values(t, n), dt)
		sl, err := x.Slice(1, 1, 4, 2)
		require.NoError(t, err)
		assert.Equal(t, []float64{1, 0, 0, 0, 1, 0}, values(t, sl), dt)
		tr, err := x.Transpose(0, 1)
		require.NoError(t, err)
		assert.Equal(t, []float64{0, 1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0}, values(t, tr), dt)
		u, err := sl.Unsqueeze(0)
		require.NoError(t, err)
		assert.Equal(t, []int{1, 3, 2}, u.Shape())
		assert.Equal(t, values(t, sl), values(t, u), dt)
		r, err := tr.Reshape(2, 6) // copies: tr is not contiguous
		require.NoError(t, err)
		assert.Equal(t, values(t, tr), values(t, r), dt)
		assert.True(t, sl.Contiguous().Equal(sl), dt)
		c := Zeros(dt, 3, 2)
		require.NoError(t, c.CopyFrom(sl))
		assert.True(t, c.Equal(sl.Clone()), dt)
	}
}

// TestStackViews stacks views along the first dimension and the second:
// contiguous ones at an offset in their storage (copied whole on the
// first dimension) beside ones that are not contiguous (copied element by
// element), and empty and 0-d tensors.
func TestStackViews(t *testing.T) {
	base := f64s(t, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 4, 3)
	rows, err := base.Narrow(0, 2, 2) // [[6 7 8] [9 10 11]], contiguous at an offset
	require.NoError(t, err)
	require.True(t, rows.IsContiguous())
	cols, err := base.Narrow(0, 0, 3)
	require.NoError(t, err)
	tr, err := cols.Transpose(0, 1) // 3x3 transposed: [[0 3 6] [1 4 7] [2 5 8]]
	require.NoError(t, err)
	tr, err = tr.Narrow(0, 0, 2) // [[0 3 6] [1 4 7]], not contiguous
	require.NoError(t, err)
	require.False(t, tr.IsContiguous())

	s, err := Stack([]*Tensor{rows, tr, rows}, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 2, 3}, s.Shape())
	assert.Equal(t, []float64{6, 7, 8, 9, 10, 11, 0, 3, 6, 1, 4, 7, 6, 7, 8, 9, 10, 11}, values(t, s))

	s, err = Stack([]*Tensor{tr, rows}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2, 3}, s.Shape())
	assert.Equal(t, []float64{0, 3, 6, 6, 7, 8, 1, 4, 7, 9, 10, 11}, values(t, s))

	empty, err := base.Narrow(0, 1, 0)
	require.NoError(t, err)
	s, err = Stack([]*Tensor{empty, empty}, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 0, 3}, s.Shape())

	x, err := base.Select(0, 3)
	require.NoError(t, err)
	y, err := x.Select(0, 1) // 0-d, the element 10
	require.NoError(t, err)
	s, err = Stack([]*Tensor{y, y}, 0)
	require.NoError(t, err)
	assert.Equal(t, []float64{10, 10}, values(t, s))
}
