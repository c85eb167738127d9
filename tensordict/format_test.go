package tensordict

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

func TestWriteTree(t *testing.T) {
	nested := func(t *testing.T) *TensorDict {
		td := New()
		require.NoError(t, td.Set(K("a", "x"), tensor.Ones(tensor.Int8, 2)))
		require.NoError(t, td.Set(K("a", "b", "y"), tensor.Zeros(tensor.Float64, 2, 2)))
		require.NoError(t, td.Set(K("a", "z"), tensor.Ones(tensor.Float16, 2)))
		require.NoError(t, td.Set(K("s"), tensor.Full(tensor.Int32, 7)))
		return td
	}
	tests := []struct {
		name string
		td   func(t *testing.T) *TensorDict
		opts TreeOptions
		want string
	}{
		{"empty", func(*testing.T) *TensorDict { return New() }, TreeOptions{},
			"TensorDict, batch size [], 0 tensor leaves, 0 B\n(no entries)\n"},
		{"nested branches", nested, TreeOptions{Values: 2}, `TensorDict, batch size [], 4 tensor leaves, 42 B
KEY        TYPE        SHAPE  BYTES  VALUES
a          TensorDict  []
├── x      int8        [2]    2 B    [1 1]
├── b      TensorDict  []
│   └── y  float64     [2 2]  32 B   [0 0 ...]
└── z      float16     [2]    4 B    [1 1]
s          int32       []     4 B    [7]
`},
		{"no values, a title", nested, TreeOptions{Title: "run 3"}, `run 3, batch size [], 4 tensor leaves, 42 B
KEY        TYPE        SHAPE  BYTES
a          TensorDict  []
├── x      int8        [2]    2 B
├── b      TensorDict  []
│   └── y  float64     [2 2]  32 B
└── z      float16     [2]    4 B
s          int32       []     4 B
`},
		{"tensorclass", func(t *testing.T) *TensorDict {
			td := New(1)
			require.NoError(t, td.Set(K("pos", "xy"), tensor.Ones(tensor.Float32, 1, 2)))
			td.SetClassName("Batch")
			pos, err := td.GetTD(K("pos"))
			require.NoError(t, err)
			pos.SetClassName("Point")
			return td
		}, TreeOptions{Values: 6}, `TensorDict, tensorclass Batch, batch size [1], 1 tensor leaf, 8 B
KEY     TYPE                 SHAPE  BYTES  VALUES
pos     Point (tensorclass)  [1]
└── xy  float32              [1 2]  8 B    [1 1]
`},
		// No tensor elements are asked for, but VALUES holds the non-tensors.
		{"non-tensor values and odd keys", func(t *testing.T) *TensorDict {
			td := New()
			require.NoError(t, td.SetNonTensor(K("none"), nil))
			require.NoError(t, td.SetNonTensor(K("a b"), map[string]any{"k": []any{1, true, "<&>"}}))
			require.NoError(t, td.SetNonTensor(K("long"), strings.Repeat("é", 100)))
			require.NoError(t, td.SetNonTensor(K("tab\tkey"), "line\nbreak"))
			return td
		}, TreeOptions{}, `TensorDict, batch size [], 0 tensor leaves, 0 B
KEY         TYPE        SHAPE  BYTES  VALUES
none        non-tensor                null
"a b"       non-tensor                {"k":[1,true,"<&>"]}
long        non-tensor                "` + strings.Repeat("é", 56) + `...
"tab\tkey"  non-tensor                "line\nbreak"
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, tt.td(t).WriteTree(&b, tt.opts))
			assert.Equal(t, tt.want, b.String())
		})
	}
}

func TestStringIsTheTree(t *testing.T) {
	td := New(2)
	x, err := tensor.Arange(tensor.Int64, 0, 10, 1)
	require.NoError(t, err)
	x, err = x.Expand(2, 10)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("x"), x))
	var b strings.Builder
	require.NoError(t, td.WriteTree(&b, TreeOptions{Values: stringValues}))
	assert.Equal(t, strings.TrimSuffix(b.String(), "\n"), td.String())
	assert.Equal(t, td.String(), fmt.Sprint(td), "fmt.Print uses String")
	assert.Contains(t, td.String(), "\nx    int64  [2 10]  160 B  [0 1 2 3 4 5 ...]")
}

func TestWriteTreeReleased(t *testing.T) {
	st, err := tensor.NewOffHeapStorage(8)
	require.NoError(t, err)
	x, err := tensor.FromStorage(tensor.Float32, st, 0, 2)
	require.NoError(t, err)
	td := New(2)
	require.NoError(t, td.Set(K("x"), x))
	require.NoError(t, st.Release())
	assert.Contains(t, td.String(), "\nx    float32  [2]    8 B    <released>")
}

// errWriter fails every write after the first n.
type errWriter struct{ n int }

var errWrite = errors.New("disk full")

func (w *errWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errWrite
	}
	w.n--
	return len(p), nil
}

func TestWriteTreeWriteError(t *testing.T) {
	td := New()
	require.NoError(t, td.Set(K("x"), tensor.Ones(tensor.Float32, 2)))
	for n := range 3 {
		err := td.WriteTree(&errWriter{n: n}, TreeOptions{})
		assert.ErrorIs(t, err, errWrite, "failing write %d", n)
	}
	assert.ErrorIs(t, New().WriteTree(&errWriter{n: 1}, TreeOptions{}), errWrite, "the (no entries) line")
}

func TestDisplayKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"obs", "obs"},
		{"état", "état"},
		{"", `""`},
		{"a b", `"a b"`},
		{"tab\there", `"tab\there"`},
		{`q"uote`, `"q\"uote"`},
		{"\x00", `"\x00"`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, displayKey(tt.in), "displayKey(%q)", tt.in)
	}
}
