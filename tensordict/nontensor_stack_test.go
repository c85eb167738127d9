package tensordict

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// labelled returns a TensorDict of batch size batch with a float32 leaf
// "x" (zeros) and the non-tensor "label" (top level) and "n.tag" (nested,
// batch size batch + [2]) set to label.
func labelled(t testing.TB, label any, batch ...int) *TensorDict {
	t.Helper()
	td := New(batch...)
	require.NoError(t, td.Set(K("x"), tensor.Zeros(tensor.Float32, batch...)))
	require.NoError(t, td.SetNonTensor(K("label"), label))
	n := New(append(append([]int(nil), batch...), 2)...)
	require.NoError(t, n.SetNonTensor(K("tag"), label))
	require.NoError(t, td.SetTD(K("n"), n))
	return td
}

// elements returns the per-element values of non-tensor k of td: a stack's
// values, or the single value repeated over the batch size of its level.
func elements(t testing.TB, td *TensorDict, k ...string) []any {
	t.Helper()
	v, err := td.GetNonTensor(K(k...))
	require.NoError(t, err)
	if s, ok := v.(*NonTensorStack); ok {
		return s.Values()
	}
	batch := td.BatchSize()
	if len(k) > 1 {
		batch = batchOf(t, td, k[:len(k)-1]...)
	}
	n := 1
	for _, d := range batch {
		n *= d
	}
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// strs is a []any of strings, for expected values.
func strs(s ...string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func TestNonTensorStackStackAndCat(t *testing.T) {
	a, b, c := labelled(t, "a", 2), labelled(t, "b", 2), labelled(t, "c", 3)
	tests := []struct {
		name  string
		make  func() (*TensorDict, error)
		batch []int
		label []any // per element of the batch, row-major
		tag   []any // per element of batch + [2]
		stack bool
	}{
		{"stack dim 0", func() (*TensorDict, error) { return Stack([]*TensorDict{a, b}, 0) }, []int{2, 2},
			strs("a", "a", "b", "b"), strs("a", "a", "a", "a", "b", "b", "b", "b"), true},
		{"stack dim 1", func() (*TensorDict, error) { return Stack([]*TensorDict{a, b}, 1) }, []int{2, 2},
			strs("a", "b", "a", "b"), strs("a", "a", "b", "b", "a", "a", "b", "b"), true},
		{"stack dim -1", func() (*TensorDict, error) { return Stack([]*TensorDict{a, b, a}, -1) }, []int{2, 3},
			strs("a", "b", "a", "a", "b", "a"), strs("a", "a", "b", "b", "a", "a", "a", "a", "b", "b", "a", "a"), true},
		{"stack equal", func() (*TensorDict, error) { return Stack([]*TensorDict{a, a}, 0) }, []int{2, 2},
			strs("a", "a", "a", "a"), strs("a", "a", "a", "a", "a", "a", "a", "a"), false},
		{"cat", func() (*TensorDict, error) { return Cat([]*TensorDict{a, c}, 0) }, []int{5},
			strs("a", "a", "c", "c", "c"), strs("a", "a", "a", "a", "c", "c", "c", "c", "c", "c"), true},
		{"cat equal", func() (*TensorDict, error) { return Cat([]*TensorDict{a, a}, 0) }, []int{4},
			strs("a", "a", "a", "a"), strs("a", "a", "a", "a", "a", "a", "a", "a"), false},
		{"cat of stacks", func() (*TensorDict, error) {
			ab, err := Cat([]*TensorDict{a, b}, 0)
			if err != nil {
				return nil, err
			}
			return Cat([]*TensorDict{ab, c}, 0)
		}, []int{7}, strs("a", "a", "b", "b", "c", "c", "c"),
			strs("a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "c", "c", "c", "c"), true},
		{"stack of stacks", func() (*TensorDict, error) {
			ab, err := Stack([]*TensorDict{a, b}, 0)
			if err != nil {
				return nil, err
			}
			return Stack([]*TensorDict{ab, ab}, 2)
		}, []int{2, 2, 2}, strs("a", "a", "a", "a", "b", "b", "b", "b"),
			strs("a", "a", "a", "a", "a", "a", "a", "a", "b", "b", "b", "b", "b", "b", "b", "b"), true},
		{"cat dim 1 of 2-d", func() (*TensorDict, error) {
			x, y := labelled(t, "x", 2, 1), labelled(t, "y", 2, 2)
			return Cat([]*TensorDict{x, y}, 1)
		}, []int{2, 3}, strs("x", "y", "y", "x", "y", "y"),
			strs("x", "x", "y", "y", "y", "y", "x", "x", "y", "y", "y", "y"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.make()
			require.NoError(t, err)
			assert.Equal(t, tc.batch, got.BatchSize())
			assert.Equal(t, tc.label, elements(t, got, "label"))
			assert.Equal(t, tc.tag, elements(t, got, "n", "tag"))
			v, err := got.GetNonTensor(K("label"))
			require.NoError(t, err)
			s, isStack := v.(*NonTensorStack)
			assert.Equal(t, tc.stack, isStack)
			if isStack {
				assert.Equal(t, tc.batch, s.Shape())
			}
		})
	}
}

// abcd returns a TensorDict of batch size [2, 2] whose "label" is the stack
// a b / c d and whose leaf "x" holds 0 1 / 2 3, so that every layout
// operation can be checked against the leaf it moves the same way.
func abcd(t testing.TB) *TensorDict {
	t.Helper()
	td := New(2, 2)
	x, err := tensor.FromSlice([]int64{0, 1, 2, 3}, 2, 2)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("x"), x))
	s, err := NewNonTensorStack(strs("a", "b", "c", "d"), 2, 2)
	require.NoError(t, err)
	require.NoError(t, td.SetNonTensor(K("label"), s))
	return td
}

func TestNonTensorStackLayout(t *testing.T) {
	mask, err := tensor.FromSlice([]bool{true, false, false, true}, 2, 2)
	require.NoError(t, err)
	tests := []struct {
		name  string
		op    func(td *TensorDict) (*TensorDict, error)
		label []any // expected per-element labels; nil: a single value, want
		want  any
	}{
		{"Index", func(td *TensorDict) (*TensorDict, error) { return td.Index(1) }, strs("c", "d"), nil},
		{"IndexDim", func(td *TensorDict) (*TensorDict, error) { return td.IndexDim(1, 0) }, strs("a", "c"), nil},
		{"Index twice", func(td *TensorDict) (*TensorDict, error) {
			r, err := td.Index(1)
			if err != nil {
				return nil, err
			}
			return r.Index(0)
		}, nil, "c"},
		{"Slice", func(td *TensorDict) (*TensorDict, error) { return td.Slice(1, 1, 2, 1) }, strs("b", "d"), nil},
		{"Slice to one", func(td *TensorDict) (*TensorDict, error) {
			r, err := td.Slice(1, 1, 2, 1)
			if err != nil {
				return nil, err
			}
			return r.Slice(0, 0, 1, 1)
		}, nil, "b"},
		{"Slice rows", func(td *TensorDict) (*TensorDict, error) { return td.Slice(0, -1, 9, 1) }, strs("c", "d"), nil},
		{"Transpose", func(td *TensorDict) (*TensorDict, error) { return td.Transpose(0, 1) }, strs("a", "c", "b", "d"), nil},
		{"Reshape", func(td *TensorDict) (*TensorDict, error) { return td.Reshape(4) }, strs("a", "b", "c", "d"), nil},
		{"Reshape of transpose", func(td *TensorDict) (*TensorDict, error) {
			r, err := td.Transpose(0, 1)
			if err != nil {
				return nil, err
			}
			return r.Reshape(-1)
		}, strs("a", "c", "b", "d"), nil},
		{"Unsqueeze", func(td *TensorDict) (*TensorDict, error) { return td.Unsqueeze(1) }, strs("a", "b", "c", "d"), nil},
		{"Expand", func(td *TensorDict) (*TensorDict, error) { return td.Expand(2, 2, 2) }, strs("a", "b", "c", "d", "a", "b", "c", "d"), nil},
		{"IndexSelect", func(td *TensorDict) (*TensorDict, error) { return td.IndexSelect([]int{1, 1, 0}) }, strs("c", "d", "c", "d", "a", "b"), nil},
		{"Mask", func(td *TensorDict) (*TensorDict, error) { return td.Mask(mask) }, strs("a", "d"), nil},
		{"Clone", func(td *TensorDict) (*TensorDict, error) { return td.Clone(), nil }, strs("a", "b", "c", "d"), nil},
		{"MulScalar", func(td *TensorDict) (*TensorDict, error) { return td.MulScalar(2), nil }, strs("a", "b", "c", "d"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := abcd(t)
			got, err := tc.op(td)
			require.NoError(t, err)
			if tc.label == nil {
				v, err := got.GetNonTensor(K("label"))
				require.NoError(t, err)
				assert.Equal(t, tc.want, v)
				return
			}
			assert.Equal(t, tc.label, elements(t, got, "label"))
			// The leaf moved the same way: its values index the labels.
			if tc.name != "MulScalar" {
				x, err := tensor.Data[int64](leaf(t, got, "x").Contiguous())
				require.NoError(t, err)
				for i, p := range x {
					assert.Equal(t, strs("a", "b", "c", "d")[p], tc.label[i], "element %d", i)
				}
			}
		})
	}
}

func TestNonTensorStackSplitUnbind(t *testing.T) {
	td := abcd(t)
	rows, err := td.Unbind(0)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, strs("a", "b"), elements(t, rows[0], "label"))
	assert.Equal(t, strs("c", "d"), elements(t, rows[1], "label"))
	back, err := Stack(rows, 0)
	require.NoError(t, err)
	v, err := back.GetNonTensor(K("label"))
	require.NoError(t, err)
	w, err := td.GetNonTensor(K("label"))
	require.NoError(t, err)
	assert.Equal(t, w, v)

	cols, err := td.Split(1, 1)
	require.NoError(t, err)
	require.Len(t, cols, 2)
	assert.Equal(t, strs("a", "c"), elements(t, cols[0], "label"))
	assert.Equal(t, strs("b", "d"), elements(t, cols[1], "label"))

	items, err := rows[1].Unbind(0)
	require.NoError(t, err)
	for i, want := range []string{"c", "d"} {
		v, err := items[i].GetNonTensor(K("label"))
		require.NoError(t, err)
		assert.Equal(t, want, v, "a single element gives back its value")
	}
}

func TestNonTensorStackRefused(t *testing.T) {
	td := abcd(t)
	tests := []struct {
		name string
		op   func() error
		want string
	}{
		{"Sum", func() error { _, err := td.Sum(0); return err }, "key label"},
		{"Pad", func() error { _, err := td.Pad([]int{0, 1}, 0); return err }, "NonTensorStack"},
		{"ApplyWith new batch", func() error {
			_, err := td.ApplyWith(nil, func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return ts[0].Reshape(4) }, ApplyBatchSize(4))
			return err
		}, "NonTensorStack"},
		{"SetNonTensor wrong shape", func() error {
			s, err := NewNonTensorStack(strs("a", "b"), 2)
			require.NoError(t, err)
			return td.SetNonTensor(K("other"), s)
		}, "shape [2], the batch size is [2 2]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNewNonTensorStack(t *testing.T) {
	tests := []struct {
		name   string
		values []any
		shape  []int
		want   string // error substring, "" for none
		limit  bool
	}{
		{"ok", []any{1, "x", nil, []int{1}}, []int{2, 2}, "", false},
		{"scalar shape", []any{"x"}, nil, "", false},
		{"empty", nil, []int{0, 3}, "", false},
		{"too few", []any{1}, []int{2}, "1 values for shape [2], want 2", false},
		{"negative", nil, []int{-1}, "dimension 0 is negative", false},
		{"nested stack", []any{&NonTensorStack{}, 1}, []int{2}, "stacks do not nest", false},
		{"not JSON-able", []any{make(chan int), 1}, []int{2}, "value 0", false},
		{"too many", nil, []int{MaxStackValues, 2}, "more than", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewNonTensorStack(tc.values, tc.shape...)
			if tc.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				assert.Equal(t, tc.limit, errors.Is(err, ErrLimit))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, len(tc.values), s.Len())
			assert.Equal(t, tc.shape, s.Shape())
		})
	}
}

func TestNonTensorStackAccessors(t *testing.T) {
	s, err := NewNonTensorStack([]any{1, "b", 2.5, []string{"x"}, nil, true}, 2, 3)
	require.NoError(t, err)
	assert.Equal(t, []any{[]any{int64(1), "b", 2.5}, []any{[]any{"x"}, nil, true}}, s.ToList())
	v, err := s.At(1, -3)
	require.NoError(t, err)
	assert.Equal(t, []any{"x"}, v)
	_, err = s.At(2, 0)
	assert.ErrorContains(t, err, "index 2 out of range for dimension 0")
	_, err = s.At(0)
	assert.ErrorContains(t, err, "1 indices for shape [2 3]")
	vals := s.Values()
	vals[0] = "changed"
	again, _ := s.At(0, 0)
	assert.Equal(t, int64(1), again, "Values returns a copy")
	assert.Equal(t, "NonTensorStack([[1, 'b', 2.5], [['x'], None, True]], batch_size=torch.Size([2, 3]), device=None)", s.PythonRepr())

	// A uniform stack is stored as its one value.
	u, err := NewNonTensorStack(strs("same", "same"), 2)
	require.NoError(t, err)
	td := New(2)
	require.NoError(t, td.SetNonTensor(K("u"), u))
	got, err := td.GetNonTensor(K("u"))
	require.NoError(t, err)
	assert.Equal(t, "same", got)
}

func TestNonTensorStackEq(t *testing.T) {
	td := abcd(t)
	o := abcd(t)
	s, err := NewNonTensorStack(strs("a", "x", "c", "x"), 2, 2)
	require.NoError(t, err)
	require.NoError(t, o.SetNonTensor(K("label"), s))
	eq, err := td.Eq(o)
	require.NoError(t, err)
	got, err := tensor.Data[bool](leaf(t, eq, "label").Contiguous())
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, false}, got)
	same, err := td.Clone().Eq(td)
	require.NoError(t, err)
	assert.True(t, same.All())
}

func TestNonTensorStackExpandLimit(t *testing.T) {
	td := abcd(t)
	_, err := td.Expand(MaxStackValues, 2, 2)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrLimit), "%v", err)
}

func TestNonTensorStackJSONAndTree(t *testing.T) {
	td := abcd(t)
	v, err := td.GetNonTensor(K("label"))
	require.NoError(t, err)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	assert.Equal(t, `[["a","b"],["c","d"]]`, string(b))
	assert.Contains(t, td.String(), `[["a","b"],["c","d"]]`)
	assert.Contains(t, td.PythonRepr(), "NonTensorStack([['a', 'b'], ['c', 'd']], batch_size=torch.Size([2, 2]), device=None)")
}

func TestNonTensorStackFlattenKeys(t *testing.T) {
	td := New(2)
	n := New(2)
	require.NoError(t, n.SetNonTensor(K("s"), mustStack(t, strs("a", "b"), 2)))
	require.NoError(t, td.SetTD(K("n"), n))
	flat, err := td.FlattenKeys(".")
	require.NoError(t, err)
	assert.Equal(t, strs("a", "b"), elements(t, flat, "n.s"))
	back, err := flat.UnflattenKeys(".")
	require.NoError(t, err)
	assert.Equal(t, strs("a", "b"), elements(t, back, "n", "s"))

	deep := New(2, 2)
	require.NoError(t, deep.SetNonTensor(K("s"), mustStack(t, strs("a", "b", "c", "d"), 2, 2)))
	require.NoError(t, td.SetTD(K("d"), deep))
	_, err = td.FlattenKeys(".")
	assert.ErrorContains(t, err, "key d.s is a NonTensorStack of batch size [2 2], which cannot move to batch size [2]")
}
