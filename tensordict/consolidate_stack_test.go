package tensordict

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// pythonStackTD is tensordict's test_stack_consolidate:
// torch.stack([TensorDict(a="a string", b="b string"),
// TensorDict(a="another string", b="bnother string")]).
func pythonStackTD(t testing.TB) *TensorDict {
	t.Helper()
	x, y := New(), New()
	require.NoError(t, x.SetNonTensor(K("a"), "a string"))
	require.NoError(t, x.SetNonTensor(K("b"), "b string"))
	require.NoError(t, y.SetNonTensor(K("a"), "another string"))
	require.NoError(t, y.SetNonTensor(K("b"), "bnother string"))
	td, err := Stack([]*TensorDict{x, y}, 0)
	require.NoError(t, err)
	return td
}

func TestConsolidatedMetadataNonTensorStack(t *testing.T) {
	c, err := pythonStackTD(t).Consolidate()
	require.NoError(t, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	// Python's layout (_reduce_vals_and_metadata on a NonTensorStack):
	// the elements along stack_dim as non-tensors "0", "1", ....
	want := `{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"device":null,"names":[null],"batch_size":[2],"is_locked":false},` +
		`"a":{"cls":"NonTensorStack","non_tensors":{"0":["a string",[],null],"1":["another string",[],null]},"leaves":{},"cls_metadata":{"stack_dim":0,"stack_dim_name":null,"is_locked":false}},` +
		`"b":{"cls":"NonTensorStack","non_tensors":{"0":["b string",[],null],"1":["bnother string",[],null]},"leaves":{},"cls_metadata":{"stack_dim":0,"stack_dim_name":null,"is_locked":false}}}`
	assert.Equal(t, want, string(meta))
}

// stackTree returns a TensorDict of batch size [2, 3] with a leaf, a plain
// non-tensor, a stack at the top level, one that differs only along the
// second dimension (nested stacks in the metadata), and one at a nested
// level of batch size [2, 3, 2].
func stackTree(t testing.TB) *TensorDict {
	t.Helper()
	td := New(2, 3)
	require.NoError(t, td.Set(K("x"), arange(t, 2, 3)))
	require.NoError(t, td.SetNonTensor(K("plain"), "same"))
	require.NoError(t, td.SetNonTensor(K("rows"), mustStack(t, []any{"r0", "r0", "r0", 1.5, 1.5, 1.5}, 2, 3)))
	require.NoError(t, td.SetNonTensor(K("cells"), mustStack(t, []any{0, 1, 2, "a", "a", []any{"l"}}, 2, 3)))
	n := New(2, 3, 2)
	require.NoError(t, n.SetNonTensor(K("deep"), mustStack(t, []any{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, true}, 2, 3, 2)))
	require.NoError(t, td.SetTD(K("n"), n))
	return td
}

// sameNonTensors checks that got holds want's non-tensor values.
func sameNonTensors(t *testing.T, want, got *TensorDict) {
	t.Helper()
	for _, k := range [][]string{{"plain"}, {"rows"}, {"cells"}, {"n", "deep"}} {
		w, err := want.GetNonTensor(K(k...))
		require.NoError(t, err)
		g, err := got.GetNonTensor(K(k...))
		require.NoError(t, err, "%v", k)
		assert.Equal(t, w, g, "%v", k)
	}
}

func TestConsolidateNonTensorStackRoundTrip(t *testing.T) {
	td := stackTree(t)
	c, err := td.Consolidate()
	require.NoError(t, err)
	sameNonTensors(t, td, c)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	back, err := FromConsolidated(c.ConsolidatedStorage(), meta)
	require.NoError(t, err)
	sameNonTensors(t, td, back)
	x, err := tensor.Data[float32](leaf(t, back, "x"))
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 2, 3, 4, 5}, x)
	assert.True(t, back.IsConsolidated())

	// Through a file, as Python's consolidate(filename).
	path := t.TempDir() + "/td.bin"
	require.NoError(t, td.SaveConsolidated(path))
	loaded, err := LoadConsolidated(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, loaded.Release()) }()
	sameNonTensors(t, td, loaded)
}

func TestFromConsolidatedNonTensorStackLimits(t *testing.T) {
	td := New(4)
	require.NoError(t, td.SetNonTensor(K("s"), mustStack(t, strs("a", "b", "c", "d"), 4)))
	c, err := td.Consolidate()
	require.NoError(t, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	// The entry s, its 4 elements, and its 4 values.
	_, err = FromConsolidated(c.ConsolidatedStorage(), meta, WithMaxEntries(8))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrLimit), "%v", err)
	_, err = FromConsolidated(c.ConsolidatedStorage(), meta, WithMaxEntries(9))
	require.NoError(t, err)
}

func TestInitRemoteWithTorchRefusesStack(t *testing.T) {
	_, _, err := torchPrepare(pythonStackTD(t), false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key a is a NonTensorStack")
}
