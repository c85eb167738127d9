package tensordict

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// stackFixture is a Python-layout directory holding NonTensorStacks (see
// its README.md).
var stackFixture = filepath.Join("testdata", "nontensor_stack")

func TestLoadMemmapNonTensorStackFixture(t *testing.T) {
	td, err := LoadMemmap(stackFixture, CopyOnWrite())
	require.NoError(t, err)
	defer func() { require.NoError(t, td.Release()) }()
	assert.Equal(t, []int{3}, td.BatchSize())
	obs, err := tensor.Data[float32](leaf(t, td, "obs"))
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 2}, obs)
	assert.Equal(t, strs("a", "b", "c"), elements(t, td, "label"))
	label, err := td.GetNonTensor(K("label"))
	require.NoError(t, err)
	assert.IsType(t, &NonTensorStack{}, label)
	pairs, err := td.GetNonTensor(K("pairs"))
	require.NoError(t, err)
	assert.Equal(t, []any{int64(0), int64(1)}, pairs, "equal elements are one value; lists stay values")
	assert.Equal(t, strs("x0", "y0", "x1", "y1", "x2", "y2"), elements(t, td, "nested", "grid"),
		"stack_dim 1 on disk, data in batch order")

	row, err := td.Index(2)
	require.NoError(t, err)
	v, err := row.GetNonTensor(K("label"))
	require.NoError(t, err)
	assert.Equal(t, "c", v)
	assert.Equal(t, strs("x2", "y2"), elements(t, row, "nested", "grid"))
}

func TestMemmapNonTensorStackLayout(t *testing.T) {
	// The label of the fixture, built in Go and saved, is byte for byte
	// what Python wrote.
	td := New(3)
	require.NoError(t, td.Set(K("obs"), tensor.Zeros(tensor.Float32, 3)))
	parts := make([]*TensorDict, 3)
	for i, l := range []string{"a", "b", "c"} {
		parts[i] = New()
		require.NoError(t, parts[i].SetNonTensor(K("label"), l))
	}
	st, err := Stack(parts, 0)
	require.NoError(t, err)
	require.NoError(t, td.Update(st))
	dir := filepath.Join(t.TempDir(), "td")
	saved, err := td.Memmap(dir)
	require.NoError(t, err)
	defer func() { require.NoError(t, saved.Release()) }()
	want, err := os.ReadFile(filepath.Join(stackFixture, "label", "meta.json"))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "label", "meta.json"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	root, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	require.NoError(t, err)
	assert.Contains(t, string(root), `"label": {"type": "NonTensorStack"}`)
	entries, err := os.ReadDir(filepath.Join(dir, "label"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only meta.json, as Python: no directory per element")
}

func TestMemmapNonTensorStackRoundTrip(t *testing.T) {
	mixed, err := NewNonTensorStack([]any{1, 2.5, "s", nil, true, []any{"l", 1}, map[string]any{"k": "v", "a": []any{}}, "é\"\\"}, 2, 2, 2)
	require.NoError(t, err)
	tests := []struct {
		name  string
		batch []int
		key   Key
		v     any
	}{
		{"strings", []int{3}, K("s"), mustStack(t, strs("a", "b", "c"), 3)},
		{"mixed values", []int{2, 2, 2}, K("m"), mixed},
		{"nested level", []int{2}, K("n", "deep"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := New(tc.batch...)
			v := tc.v
			if v == nil { // a stack of the nested level, batch size [2, 2]
				require.NoError(t, td.SetTD(K("n"), New(2, 2)))
				v = mustStack(t, strs("p", "q", "r", "s"), 2, 2)
			}
			require.NoError(t, td.SetNonTensor(tc.key, v))
			dir := filepath.Join(t.TempDir(), "td")
			saved, err := td.Memmap(dir)
			require.NoError(t, err)
			defer func() { require.NoError(t, saved.Release()) }()
			back, err := LoadMemmap(dir)
			require.NoError(t, err)
			defer func() { require.NoError(t, back.Release()) }()
			got, err := back.GetNonTensor(tc.key)
			require.NoError(t, err)
			want, err := td.GetNonTensor(tc.key)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// mustStack is NewNonTensorStack that fails t on error.
func mustStack(t testing.TB, values []any, shape ...int) *NonTensorStack {
	t.Helper()
	s, err := NewNonTensorStack(values, shape...)
	require.NoError(t, err)
	return s
}

func TestLoadMemmapNonTensorStackRefused(t *testing.T) {
	const typ = `"_type":"<class 'tensordict.tensorclass.NonTensorStack'>"`
	tests := []struct {
		name  string
		batch string // the parent's shape
		meta  string // the stack's meta.json
		want  string
		limit bool
	}{
		{"pickled", "[2]", `{` + typ + `,"stack_dim":0,"device":null,"data":"pickle.pkl"}`, "pickled", false},
		{"no data", "[2]", `{` + typ + `,"stack_dim":0,"device":null}`, `no "data" member`, false},
		{"too short", "[3]", `{` + typ + `,"stack_dim":0,"device":null,"data":["a","b"]}`, "dimension 0 has 2 elements", false},
		{"not a list", "[2]", `{` + typ + `,"stack_dim":0,"device":null,"data":{"a":1}}`, "not a list", false},
		{"too shallow", "[2, 2]", `{` + typ + `,"stack_dim":0,"device":null,"data":["a","b"]}`, "dimension 1 has a string", false},
		{"scalar batch", "[]", `{` + typ + `,"stack_dim":0,"device":null,"data":["a"]}`, "under batch size []", false},
		{"bad stack_dim", "[2]", `{` + typ + `,"stack_dim":-1,"device":null,"data":["a","b"]}`, "stack_dim -1", false},
		{"huge batch", "[1000000000, 1000000000]", `{` + typ + `,"stack_dim":0,"device":null,"data":[]}`, "more than", true},
		{"bad JSON value", "[2]", `{` + typ + `,"stack_dim":0,"device":null,"data":[1e999,1]}`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"),
				[]byte(`{"v": {"type": "NonTensorStack"}, "shape": `+tc.batch+`, "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}`), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(dir, "v"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "v", "meta.json"), []byte(tc.meta), 0o644))
			_, err := LoadMemmap(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), filepath.Join(dir, "v"), "the error names the file")
			assert.Equal(t, tc.limit, errors.Is(err, ErrLimit), "%v", err)
		})
	}
}
