package tensor

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// huge returns a float32 view of 2^40 elements (4 TiB once copied) over one
// element: far more than any test machine has.
func huge(t *testing.T) *Tensor {
	t.Helper()
	x, err := Full(Float32, 1, 1, 1).Expand(1<<20, 1<<20)
	require.NoError(t, err)
	return x
}

// TestResultTooLargeIsAnError checks that every operation that returns an
// error and allocates a result (or a temporary) from a shape refuses one
// that does not fit with an error wrapping ErrNoMemory, where the Go
// runtime used to end the process with "fatal error: runtime: out of
// memory".
func TestResultTooLargeIsAnError(t *testing.T) {
	x := huge(t)
	row := Full(Float32, 1, 1<<20)
	mask := Ones(Bool, 1<<20)
	all := make([]int, 1<<20)
	for _, tc := range []struct {
		name string
		call func() (*Tensor, error)
	}{
		{"New", func() (*Tensor, error) { return New(Float32, 1<<20, 1<<20) }},
		{"New overflow", func() (*Tensor, error) { return New(Int64, 1<<40, 1<<40) }},
		{"New overflow in bytes", func() (*Tensor, error) { return New(Int64, 1<<61) }},
		{"ContiguousChecked", x.ContiguousChecked},
		{"Expand overflow", func() (*Tensor, error) { return Full(Int8, 1, 1, 1).Expand(1<<40, 1<<40) }},
		{"Add", func() (*Tensor, error) { return x.Add(x) }},
		{"Add broadcast", func() (*Tensor, error) {
			col, err := Full(Float32, 1, 1<<20, 1).Expand(1<<20, 1)
			require.NoError(t, err)
			return col.Add(row) // [2^20 1] + [2^20]: 2^40 elements
		}},
		{"Add promoted", func() (*Tensor, error) { return x.Add(Full(Float64, 1, 1)) }},
		{"Eq", func() (*Tensor, error) { return x.Eq(x) }},
		{"IsClose", func() (*Tensor, error) { return x.IsClose(x, 0, 0, false) }},
		{"Pow", func() (*Tensor, error) { return x.Pow(x) }},
		{"Neg", x.Neg},
		{"Where", func() (*Tensor, error) { return Where(Full(Bool, 1, 1), x, x) }},
		{"MaskedFill", func() (*Tensor, error) { return x.MaskedFill(Full(Bool, 1, 1), 0) }},
		{"IndexSelect", func() (*Tensor, error) { return x.IndexSelect(0, all) }},
		{"MaskSelect", func() (*Tensor, error) { return x.MaskSelect(mask) }},
		{"Stack", func() (*Tensor, error) { return Stack([]*Tensor{x, x}, 0) }},
		{"Cat", func() (*Tensor, error) { return Cat([]*Tensor{x, x}, 0) }},
		{"Pad", func() (*Tensor, error) { return x.Pad([]int{1, 1}, 0) }},
		{"Pad overflow", func() (*Tensor, error) { return x.Pad([]int{1 << 40, 0}, 0) }},
		{"SumDims", func() (*Tensor, error) { return x.SumDims([]int{1}, false) }},
		{"MeanDims", func() (*Tensor, error) { return x.MeanDims(nil, false) }},
		{"MaxDim", func() (*Tensor, error) { v, _, err := x.MaxDim(1, false); return v, err }},
		{"Reshape", func() (*Tensor, error) { return x.Reshape(-1) }},
		{"Arange", func() (*Tensor, error) { return Arange(Float32, 0, 1<<39, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *Tensor
			var err error
			require.NotPanics(t, func() { got, err = tc.call() })
			require.ErrorIs(t, err, ErrNoMemory)
			assert.Nil(t, got)
		})
	}
}

// TestResultTooLargePanicsWithError checks the operations without an error
// result: a result that does not fit panics with an error value wrapping
// ErrNoMemory, which recover gets, instead of ending the process.
func TestResultTooLargePanicsWithError(t *testing.T) {
	x := huge(t)
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"Zeros", func() { Zeros(Float32, 1<<20, 1<<20) }},
		{"Ones", func() { Ones(Float32, 1<<20, 1<<20) }},
		{"Full overflow", func() { Full(Int64, 1, 1<<62, 4) }},
		{"Empty", func() { Empty(Float32, 1<<20, 1<<20) }},
		{"Clone", func() { x.Clone() }},
		{"Contiguous", func() { x.Contiguous() }},
		{"To", func() { x.To(Float64) }},
		{"MulScalar", func() { x.MulScalar(2) }},
		{"EqScalar", func() { x.EqScalar(1) }},
		{"Sum", func() { x.Sum() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recoverFrom(tc.call)
			err, ok := r.(error)
			require.True(t, ok, "panic value %v (%T) is not an error", r, r)
			require.ErrorIs(t, err, ErrNoMemory)
		})
	}
}

func recoverFrom(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// TestSmallResultsStillAllocate checks that New and ContiguousChecked
// return what Zeros and Contiguous do, and that the size check lets
// results of ordinary size through (above the size it starts checking at).
func TestSmallResultsStillAllocate(t *testing.T) {
	z, err := New(Int32, 2, 3)
	require.NoError(t, err)
	assert.True(t, z.Equal(Zeros(Int32, 2, 3)))
	_, err = New(Float32, -1)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNoMemory), "a negative dimension is not a lack of memory: %v", err)

	e, err := Full(Float32, 2, 1, 3).Expand(4, 3)
	require.NoError(t, err)
	c, err := e.ContiguousChecked()
	require.NoError(t, err)
	assert.True(t, c.IsContiguous())
	assert.True(t, c.Equal(Full(Float32, 2, 4, 3)))
	same, err := c.ContiguousChecked()
	require.NoError(t, err)
	assert.Same(t, c, same)

	big, err := Full(Uint8, 7, 1).Expand(80 << 20) // 80 MiB: checked, and available
	require.NoError(t, err)
	bc, err := big.ContiguousChecked()
	require.NoError(t, err)
	assert.Equal(t, 80<<20, bc.Numel())
}
