package tensordict

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// hugeTD returns td.Expand(1<<20, 1<<20, 2) of a small TensorDict: views of
// 2^41 elements per leaf, which no machine can copy (issue 41 item 10).
func hugeTD(t *testing.T) *TensorDict {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 1, 2, 3)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Int64, 2, 2)))
	e, err := td.Expand(1<<20, 1<<20, 2)
	require.NoError(t, err)
	return e
}

// TestTooLargeResultIsAnError checks that the operations with an error
// result refuse a result (or a temporary) too large for memory with an
// error wrapping ErrNoMemory that names the key, where the Go runtime used
// to end the process with "fatal error: runtime: out of memory".
func TestTooLargeResultIsAnError(t *testing.T) {
	e := hugeTD(t)
	for _, tc := range []struct {
		name string
		call func() (*TensorDict, error)
	}{
		{"ContiguousChecked", e.ContiguousChecked},
		{"Expand overflow", func() (*TensorDict, error) { return e.Expand(1<<40, 1<<40, 1<<20, 1<<20, 2) }},
		{"Add", func() (*TensorDict, error) { return e.Add(e) }},
		{"Cat", func() (*TensorDict, error) { return Cat([]*TensorDict{e, e}, 0) }},
		{"Stack", func() (*TensorDict, error) { return Stack([]*TensorDict{e, e}, 0) }},
		{"Pad", func() (*TensorDict, error) { return e.Pad([]int{0, 1}, 0) }},
		{"Sum", func() (*TensorDict, error) { return e.Sum(1) }},
		{"PowScalar", func() (*TensorDict, error) { return e.PowScalar(2) }},
		{"Apply Clone", func() (*TensorDict, error) {
			return e.Apply(func(_ Key, x *tensor.Tensor) (*tensor.Tensor, error) { return x.Clone(), nil })
		}},
		{"ApplyWith Contiguous", func() (*TensorDict, error) {
			return e.ApplyWith(nil, func(_ Key, xs []*tensor.Tensor) (*tensor.Tensor, error) { return xs[0].Contiguous(), nil })
		}},
		{"PadSequence", func() (*TensorDict, error) { out, _, err := PadSequence([]*TensorDict{e, e}, 0, 0); return out, err }},
		{"Update clone", func() (*TensorDict, error) {
			dst := New()
			return dst, dst.Update(e, UpdateClone())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = tc.call() })
			require.ErrorIs(t, err, ErrNoMemory)
			require.ErrorIs(t, err, tensor.ErrNoMemory)
			if tc.name != "Expand overflow" {
				assert.Contains(t, err.Error(), "key ")
			}
		})
	}
}

// TestTooLargeResultPanicsWithError checks the forms without an error
// result (fixed signatures): a result too large for memory panics with an
// error value wrapping ErrNoMemory that names the key, which recover
// returns, instead of ending the process.
func TestTooLargeResultPanicsWithError(t *testing.T) {
	e := hugeTD(t)
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"Contiguous", func() { e.Contiguous() }},
		{"Clone", func() { e.Clone() }},
		{"To", func() { e.To(tensor.Float64) }},
		{"MulScalar", func() { e.MulScalar(2) }},
		{"EqScalar", func() { e.EqScalar(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recovered(tc.call)
			err, ok := r.(error)
			require.True(t, ok, "panic value %v (%T) is not an error", r, r)
			require.ErrorIs(t, err, ErrNoMemory)
		})
	}
	// The message names the operation and the key.
	err, _ := recovered(func() { e.Contiguous() }).(error)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tensordict: Contiguous: key a:")
	for _, tc := range []struct {
		name, want string
		call       func()
	}{
		{"EqScalar", "tensordict: EqScalar: key a: ", func() { e.EqScalar(1) }},
		{"NeScalar nested", "tensordict: NeScalar: key n.b: ", func() { e.Exclude(K("a")).NeScalar(1) }},
	} {
		err, _ := recovered(tc.call).(error)
		require.ErrorIs(t, err, ErrNoMemory, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
}

func recovered(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// TestContiguousChecked checks that ContiguousChecked returns what
// Contiguous does when the copy fits.
func TestContiguousChecked(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 1, 2, 3)))
	same, err := td.ContiguousChecked()
	require.NoError(t, err)
	assert.Same(t, td, same)
	e, err := td.Expand(4, 2)
	require.NoError(t, err)
	c, err := e.ContiguousChecked()
	require.NoError(t, err)
	require.True(t, c.IsContiguous())
	assert.Equal(t, []int{4, 2}, c.BatchSize())
	eq, err := c.Eq(e.Contiguous())
	require.NoError(t, err)
	assert.True(t, eq.All())
	var nilTD *TensorDict
	_, err = nilTD.ContiguousChecked()
	assert.True(t, errors.Is(err, ErrNil))
}
