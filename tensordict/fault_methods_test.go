package tensordict

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// truncatedBatched saves a TensorDict of batch size [n] with a top-level
// leaf and a nested one, loads it with LoadMemmap and truncates both files
// to nothing, as another process could. It also returns an ordinary
// TensorDict of the same structure.
func truncatedBatched(t *testing.T, n int) (loaded, plain *TensorDict) {
	t.Helper()
	plain = New(n)
	require.NoError(t, plain.Set(K("a"), tensor.Full(tensor.Float64, 2, n)))
	require.NoError(t, plain.Set(K("x", "b"), tensor.Full(tensor.Float64, 3, n, 2)))
	dir := filepath.Join(t.TempDir(), "saved")
	_, err := plain.Memmap(dir)
	require.NoError(t, err)
	loaded, err = LoadMemmap(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = loaded.Release() })
	for _, it := range loaded.Items(IncludeNested(), LeavesOnly()) {
		name, err := memmap.Filename(it.Tensor)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(name, 0))
	}
	return loaded, plain
}

// TestTruncatedMappingMethods is issue 41 item 9: every TensorDict method
// that returns an error and reads or writes the leaves, called on a
// TensorDict whose mapped files another process truncated, returns an
// error wrapping memmap.ErrFault that names the method, instead of ending
// the process with SIGBUS (the methods without an error panic with it, see
// TestTruncatedMappingNoErrorOps). Whether the mapped TensorDict is the
// receiver, the argument or the destination of a write, the fault is
// caught.
func TestTruncatedMappingMethods(t *testing.T) {
	const n = 1 << 12 // 32 KiB and 64 KiB leaves: several pages each
	loaded, plain := truncatedBatched(t, n)
	mask := tensor.Zeros(tensor.Bool, n) // MaskedFill copies every element
	ones := tensor.Ones(tensor.Bool, n)  // Where and Mask take every element
	two, err := plain.Slice(0, 0, 2, 1)
	require.NoError(t, err)
	unwrap := func(_ *TensorDict, err error) error { return err }
	unwrap2 := func(_, _ *TensorDict, err error) error { return err }
	tests := []struct {
		op string
		f  func() error
	}{
		{"Sum", func() error { return unwrap(loaded.Sum()) }},
		{"Sum", func() error { return unwrap(loaded.Sum(0)) }},
		{"Mean", func() error { return unwrap(loaded.Mean()) }},
		{"Prod", func() error { return unwrap(loaded.Prod(0)) }},
		{"Max", func() error { return unwrap(loaded.Max()) }},
		{"Min", func() error { return unwrap(loaded.Min(0)) }},
		{"Std", func() error { return unwrap(loaded.Std()) }},
		{"Var", func() error { return unwrap(loaded.Var(0)) }},
		{"AllDim", func() error { return unwrap(loaded.AllDim(0)) }},
		{"AnyDim", func() error { return unwrap(loaded.AnyDim(0)) }},
		{"MaxDim", func() error { return unwrap2(loaded.MaxDim(0)) }},
		{"MinDim", func() error { return unwrap2(loaded.MinDim(0)) }},
		{"Add", func() error { return unwrap(loaded.Add(plain)) }},
		{"Add", func() error { return unwrap(plain.Add(loaded)) }},
		{"Sub", func() error { return unwrap(loaded.Sub(plain)) }},
		{"Mul", func() error { return unwrap(loaded.Mul(plain)) }},
		{"Div", func() error { return unwrap(loaded.Div(plain)) }},
		{"Pow", func() error { return unwrap(loaded.Pow(plain)) }},
		{"Lt", func() error { return unwrap(loaded.Lt(plain)) }},
		{"Ge", func() error { return unwrap(loaded.Ge(plain)) }},
		{"Eq", func() error { return unwrap(loaded.Eq(plain)) }},
		{"Ne", func() error { return unwrap(plain.Ne(loaded)) }},
		{"IsClose", func() error { return unwrap(loaded.IsClose(plain, 1e-5, 1e-8, false)) }},
		{"IsClose", func() error { _, err := loaded.AllClose(plain, 1e-5, 1e-8); return err }},
		{"Lerp", func() error { return unwrap(loaded.Lerp(plain, 0.5)) }},
		{"Where", func() error { return unwrap(loaded.Where(ones, plain)) }},
		{"MaskedFill", func() error { return unwrap(loaded.MaskedFill(mask, 1)) }},
		{"PowScalar", func() error { return unwrap(loaded.PowScalar(2)) }},
		{"Neg", func() error { return unwrap(loaded.Neg()) }},
		{"Abs", func() error { return unwrap(loaded.Abs()) }},
		{"Clamp", func() error { return unwrap(loaded.Clamp(0, 1)) }},
		{"Pad", func() error { return unwrap(loaded.Pad([]int{1, 1}, 0)) }},
		{"IndexSelect", func() error { return unwrap(loaded.IndexSelect([]int{0, 1})) }},
		{"Mask", func() error { return unwrap(loaded.Mask(ones)) }},
		{"IndexSelect", func() error { return unwrap(loaded.GetAt(IndexList(0, 1))) }},
		{"Stack", func() error { return unwrap(Stack([]*TensorDict{plain, loaded}, 0)) }},
		{"Cat", func() error { return unwrap(Cat([]*TensorDict{loaded, plain}, 0)) }},
		{"Pad", func() error { _, _, err := PadSequence([]*TensorDict{loaded, plain}, 0, 0); return err }},
		{"Apply", func() error {
			return unwrap(loaded.Apply(func(_ Key, t *tensor.Tensor) (*tensor.Tensor, error) { return t.Clone(), nil }))
		}},
		{"ApplyWith", func() error {
			return unwrap(loaded.ApplyWith([]*TensorDict{plain}, func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return ts[0].Add(ts[1]) }))
		}},
		{"ApplyWith", func() error {
			return unwrap(loaded.ApplyWith([]*TensorDict{plain}, func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return ts[1], nil }, ApplyInto()))
		}},
		{"ApplyInPlace", func() error {
			return loaded.ApplyInPlace(func(_ Key, t *tensor.Tensor) (*tensor.Tensor, error) { return t.AddScalar(1), nil })
		}},
		{"AddInPlace", func() error { return loaded.AddInPlace(plain) }},
		{"SubInPlace", func() error { return loaded.SubInPlace(plain) }},
		{"MulInPlace", func() error { return loaded.MulInPlace(plain) }},
		{"DivInPlace", func() error { return loaded.DivInPlace(plain) }},
		{"PowInPlace", func() error { return loaded.PowInPlace(plain) }},
		{"LerpInPlace", func() error { return loaded.LerpInPlace(plain, 0.5) }},
		{"CopyFrom", func() error { return loaded.CopyFrom(plain) }},
		{"CopyFrom", func() error { return plain.Clone().CopyFrom(loaded) }},
		{"AddScalarInPlace", func() error { return loaded.AddScalarInPlace(1) }},
		{"SubScalarInPlace", func() error { return loaded.SubScalarInPlace(1) }},
		{"MulScalarInPlace", func() error { return loaded.MulScalarInPlace(2) }},
		{"DivScalarInPlace", func() error { return loaded.DivScalarInPlace(2) }},
		{"PowScalarInPlace", func() error { return loaded.PowScalarInPlace(2) }},
		{"NegInPlace", func() error { return loaded.NegInPlace() }},
		{"AbsInPlace", func() error { return loaded.AbsInPlace() }},
		{"ClampInPlace", func() error { return loaded.ClampInPlace(0, 1) }},
		{"MaskedFillInPlace", func() error { return loaded.MaskedFillInPlace(mask, 1) }},
		{"Zero", func() error { return loaded.Zero() }},
		{"Fill", func() error { return loaded.Fill(1) }},
		{"SetAt", func() error { return loaded.SetAt(IndexRange(0, 2, 1), two) }},
		{"SetAt", func() error { return loaded.SetAt(IndexList(0, 1), two) }},
		{"SetAt", func() error {
			src, err := loaded.Slice(0, 0, 2, 1)
			require.NoError(t, err)
			return plain.Clone().SetAt(IndexRange(0, 2, 1), src)
		}},
		{"SetAtKey", func() error { return loaded.SetAtKey(K("a"), tensor.Full(tensor.Float64, 1, 2), IndexRange(0, 2, 1)) }},
		{"UpdateInPlace", func() error { return loaded.UpdateInPlace(plain) }},
		{"Update", func() error { return loaded.Update(plain, WriteInPlace()) }},
		{"Update", func() error { return New(n).Update(loaded, UpdateClone()) }},
		{"Set", func() error { return loaded.Set(K("a"), tensor.Full(tensor.Float64, 1, n)) }},
		{"SetInPlace", func() error { return loaded.SetInPlace(K("a"), tensor.Full(tensor.Float64, 1, n)) }},
		{"Consolidate", func() error { return unwrap(loaded.Consolidate()) }},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			err := tt.f()
			require.ErrorIs(t, err, memmap.ErrFault)
			assert.Contains(t, err.Error(), "tensordict: "+tt.op)
		})
	}
	// The process is alive and the plain TensorDict still works.
	var sum *TensorDict
	sum, err = plain.Sum()
	require.NoError(t, err)
	a, err := sum.Get(K("a"))
	require.NoError(t, err)
	assert.Equal(t, float64(2*n), a.At())
	// All and Any return no error: they panic with the fault, as EqScalar.
	for name, f := range map[string]func(){"All": func() { loaded.All() }, "Any": func() { loaded.Any() }} {
		err := memmap.Guard(func() error { f(); return nil })
		require.ErrorIs(t, err, memmap.ErrFault, name)
		assert.Contains(t, err.Error(), "tensordict: "+name, name)
	}
	// fmt prints the leaves it cannot read as <fault>.
	assert.Contains(t, loaded.String(), "<fault>")
	assert.Equal(t, 2, strings.Count(loaded.String(), "<fault>"))
}
