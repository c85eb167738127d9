package tensordict

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestDiffRanks checks the explanation collective ranks exchange when
// their structure hashes differ, through its JSON form.
func TestDiffRanks(t *testing.T) {
	mk := func(f func(td *TensorDict)) codec.Structure {
		td := New(2)
		require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float32, 2, 3)))
		require.NoError(t, td.Set(K("n", "b"), tensor.Ones(tensor.Int64, 2)))
		if f != nil {
			f(td)
		}
		leaves := sortedLeaves(td)
		var back codec.Structure
		require.NoError(t, json.Unmarshal(encodeStructure(describeStructure(td, leaves)), &back))
		return back
	}
	ref := mk(nil)
	tests := []struct {
		name   string
		change func(td *TensorDict)
		key    Key
		detail string
	}{
		{"same", nil, nil, ""},
		{"dtype", func(td *TensorDict) { require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float64, 2, 3))) }, K("a"), "float64[2 3] on rank 1, float32[2 3] on rank 0"},
		{"extra", func(td *TensorDict) { require.NoError(t, td.Set(K("n", "c"), tensor.Ones(tensor.Int8, 2))) }, K("n", "c"), "int8[2] on rank 1, missing on rank 0"},
		{"missing", func(td *TensorDict) { require.NoError(t, td.Del(K("a"))) }, K("a"), "missing on rank 1, float32[2 3] on rank 0"},
		{"batch", func(td *TensorDict) { td.batch = []int{} }, nil, "[] on rank 1, [2] on rank 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, detail, ok := diffRanks(mk(tt.change), 1, ref, 0)
			assert.Equal(t, tt.detail == "", ok)
			assert.Equal(t, tt.key, k)
			assert.Equal(t, tt.detail, detail)
		})
	}
	// The hash the ranks compare first tells the same cases apart.
	td := New(2)
	require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float32, 2, 3)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Ones(tensor.Int64, 2)))
	assert.Equal(t, ref.Hash(codec.SortedOrder), structureHash(td, sortedLeaves(td)))
}
