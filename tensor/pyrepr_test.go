package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPythonReprGolden(t *testing.T) {
	arange := func(dt DType, n int, shape ...int) *Tensor { return arangeOf(t, dt, n, shape...) }
	scalar := func(dt DType, v float64) *Tensor { return scalarOf(t, dt, v) }
	c64, _ := FromSlice([]complex64{1 + 2i, 3 - 1i})
	c128, _ := FromSlice([]complex128{0.5 + 1i})
	for _, c := range []struct {
		x    *Tensor
		want string
	}{
		{Ones(Float32, 2, 2), "tensor([[1., 1.],\n        [1., 1.]])"},
		{Zeros(Float64, 2), "tensor([0., 0.], dtype=torch.float64)"},
		{Ones(Float16, 2), "tensor([1., 1.], dtype=torch.float16)"},
		{Ones(BFloat16, 2), "tensor([1., 1.], dtype=torch.bfloat16)"},
		{arange(Int64, 4), "tensor([0, 1, 2, 3])"},
		{arange(Int8, 2), "tensor([0, 1], dtype=torch.int8)"},
		{arange(Uint8, 2), "tensor([0, 1], dtype=torch.uint8)"},
		{arange(Int16, 2), "tensor([0, 1], dtype=torch.int16)"},
		{arange(Int32, 2), "tensor([0, 1], dtype=torch.int32)"},
		{of(t, Int64, []float64{-5, 10}, 2), "tensor([-5, 10])"},
		{of(t, Bool, []float64{1, 0}, 2), "tensor([ True, False])"},
		{scalar(Bool, 1), "tensor(True)"},
		{scalar(Float32, 3.5), "tensor(3.5000)"},
		{scalar(Int64, 7), "tensor(7)"},
		{scalar(Float64, 2), "tensor(2., dtype=torch.float64)"},
		{of(t, Float32, []float64{1.5, 2.25}, 2), "tensor([1.5000, 2.2500])"},
		{of(t, Float32, []float64{0.1, -2.5, 100}, 3), "tensor([  0.1000,  -2.5000, 100.0000])"},
		{of(t, Float32, []float64{1e10, 1}, 2), "tensor([1.0000e+10, 1.0000e+00])"},
		{of(t, Float32, []float64{1e-5, 1}, 2), "tensor([1.0000e-05, 1.0000e+00])"},
		{of(t, Float32, []float64{math.NaN(), 1, math.Inf(-1)}, 3), "tensor([nan, 1., -inf])"},
		{of(t, Float32, []float64{math.NaN(), 0.5}, 2), "tensor([   nan, 0.5000])"},
		{c64, "tensor([1.+2.j, 3.-1.j])"},
		{c128, "tensor([0.5000+1.j], dtype=torch.complex128)"},
		{Zeros(Float32, 0), "tensor([])"},
		{Zeros(Int64, 0), "tensor([], dtype=torch.int64)"},
		{Zeros(Float32, 2, 0), "tensor([], size=(2, 0))"},
		{Zeros(Bool, 0, 3), "tensor([], size=(0, 3), dtype=torch.bool)"},
		{arange(Float32, 8, 2, 2, 2), "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])"},
		{arange(Float32, 16),
			"tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n" +
				"        14., 15.])"},
		{arange(Float64, 14),
			"tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n" +
				"       dtype=torch.float64)"},
		{arange(Int64, 10000), "tensor([   0,    1,    2,  ..., 9997, 9998, 9999])"},
		{arange(Int64, 2002, 1001, 2),
			"tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n" +
				"        [1996, 1997],\n        [1998, 1999],\n        [2000, 2001]])"},
	} {
		assert.Equal(t, c.want, c.x.PythonRepr(), "%v%v", c.x.DType(), c.x.Shape())
	}
}

func TestPythonReprSummarizesInnerDimensions(t *testing.T) {
	x := Zeros(Float32, 2, 1000)
	want := "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n        [0., 0., 0.,  ..., 0., 0., 0.]])"
	assert.Equal(t, want, x.PythonRepr())
}

func TestPythonReprReleased(t *testing.T) {
	st := NewExternalStorage(make([]byte, 8), nil, nil)
	x, err := FromStorage(Float32, st, 0, 2)
	assert.NoError(t, err)
	assert.NoError(t, st.Release())
	assert.Equal(t, "tensor(<released>)", x.PythonRepr())
}
