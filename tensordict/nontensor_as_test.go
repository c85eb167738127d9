package tensordict

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGetNonTensorAs is issue 43 item 7: the typed form of GetNonTensor
// returns the value as the type asked for, converting numbers when the
// value fits (a float64 3.0 from JSON reads as int 3), and refuses a
// value of another type with an error wrapping ErrKind that names the key.
func TestGetNonTensorAs(t *testing.T) {
	type point struct {
		X, Y int
	}
	td := New(2)
	set := map[string]any{
		"str":    "hello",
		"int":    7,
		"float":  2.5,
		"whole":  3.0,
		"big":    1e20,
		"bool":   true,
		"list":   []string{"a", "b"},
		"ints":   []int{1, 2},
		"map":    map[string]int{"x": 1},
		"point":  map[string]any{"X": 1, "Y": 2},
		"null":   nil,
		"neg":    -1,
		"nested": []any{[]any{1, 2}, []any{3}},
	}
	for k, v := range set {
		require.NoError(t, td.SetNonTensor(K(k), v))
	}
	stack, err := NewNonTensorStack([]any{"a", "b"}, 2)
	require.NoError(t, err)
	require.NoError(t, td.SetNonTensor(K("stack"), stack))
	// The same values after a round trip through a file, where numbers are
	// JSON: 3.0 may come back as a float64.
	file := filepath.Join(t.TempDir(), "c")
	require.NoError(t, td.SaveConsolidated(file))
	back, err := LoadConsolidated(file)
	require.NoError(t, err)
	defer back.Release()

	ok := []struct {
		key  string
		get  func(*TensorDict, Key) (any, error)
		want any
	}{
		{"str", as[string], "hello"},
		{"int", as[int], 7},
		{"int", as[int64], int64(7)},
		{"int", as[float64], 7.0},
		{"int", as[uint8], uint8(7)},
		{"int", as[int8], int8(7)},
		{"whole", as[int], 3},
		{"whole", as[float32], float32(3)},
		{"float", as[float64], 2.5},
		{"float", as[float32], float32(2.5)},
		{"bool", as[bool], true},
		{"list", as[[]string], []string{"a", "b"}},
		{"list", as[[]any], []any{"a", "b"}},
		{"ints", as[[]int], []int{1, 2}},
		{"map", as[map[string]int], map[string]int{"x": 1}},
		{"point", as[point], point{1, 2}},
		{"nested", as[[][]int], [][]int{{1, 2}, {3}}},
		{"null", as[*int], (*int)(nil)},
		{"null", as[[]int], []int(nil)},
		{"null", as[any], nil},
		{"str", as[any], "hello"},
		{"stack", as[*NonTensorStack], stack},
	}
	for _, src := range []*TensorDict{td, back} {
		for _, tt := range ok {
			got, err := tt.get(src, K(tt.key))
			require.NoError(t, err, tt.key)
			assert.Equal(t, tt.want, got, tt.key)
		}
	}

	bad := []struct {
		key string
		get func(*TensorDict, Key) (any, error)
	}{
		{"str", as[int]},
		{"int", as[string]},
		{"float", as[int]},
		{"big", as[int64]},
		{"neg", as[uint]},
		{"bool", as[float64]},
		{"list", as[[]int]},
		{"map", as[[]string]},
		{"null", as[int]},
		{"null", as[string]},
		{"stack", as[string]},
		{"stack", as[[]string]},
		{"point", as[int]},
	}
	for _, tt := range bad {
		_, err := tt.get(td, K(tt.key))
		require.ErrorIs(t, err, ErrKind, tt.key)
		assert.Contains(t, err.Error(), "key "+tt.key, tt.key)
	}
	_, err = GetNonTensorAs[string](td, K("missing"))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = GetNonTensorAs[string]((*TensorDict)(nil), K("x"))
	assert.ErrorIs(t, err, ErrNil)
}

// as adapts GetNonTensorAs[T] to one signature for the table.
func as[T any](td *TensorDict, k Key) (any, error) { return GetNonTensorAs[T](td, k) }
