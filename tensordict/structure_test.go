package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestDescribeStructure checks that the structure a plan describes (what
// ranks exchange when their structure hashes differ) has the hash the
// ranks compare first, and tells the same changes apart.
func TestDescribeStructure(t *testing.T) {
	seed := func() *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float32, 2, 3)))
		require.NoError(t, td.Set(K("n", "b"), tensor.Ones(tensor.Int64, 2)))
		return td
	}
	ref := leafPlanOf(seed()).structure()
	for _, tt := range []struct {
		name   string
		change func(td *TensorDict)
	}{
		{"same", nil},
		{"dtype", func(td *TensorDict) { require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float64, 2, 3))) }},
		{"extra", func(td *TensorDict) { require.NoError(t, td.Set(K("n", "c"), tensor.Ones(tensor.Int8, 2))) }},
		{"missing", func(td *TensorDict) { require.NoError(t, td.Del(K("a"))) }},
		{"batch", func(td *TensorDict) { td.batch = []int{} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			td := seed()
			if tt.change != nil {
				tt.change(td)
			}
			p := leafPlanOf(td).structure()
			d := p.describe()
			assert.Equal(t, d.Hash(codec.SortedOrder), p.hash)
			assert.Equal(t, tt.change == nil, p.hash == ref.hash)
			assert.Equal(t, td.BatchSize(), d.Batch)
			require.Len(t, d.Leaves, len(p.leaves))
			for i, it := range p.leaves {
				assert.Equal(t, codec.Key(it.Key), d.Leaves[i].Key)
			}
		})
	}
	assert.Equal(t, codec.Structure{}, (*leafPlan)(nil).describe(), "a rank without a TensorDict")
}
