package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestStackCatMismatch is issue 43 item 7: Stack's and Cat's errors about
// TensorDicts that differ in structure match ErrMismatch and name the key.
func TestStackCatMismatch(t *testing.T) {
	base := func() *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("a"), tensor.Zeros(tensor.Float32, 2, 3)))
		require.NoError(t, td.Set(K("n", "b"), tensor.Zeros(tensor.Int64, 2)))
		return td
	}
	variants := []struct {
		name, key string
		edit      func(td *TensorDict) *TensorDict
	}{
		{"missing key", "n.b", func(td *TensorDict) *TensorDict { require.NoError(t, td.Del(K("n", "b"))); return td }},
		{"extra key", "n.c", func(td *TensorDict) *TensorDict {
			require.NoError(t, td.Set(K("n", "c"), tensor.Zeros(tensor.Int64, 2)))
			return td
		}},
		{"kind", "n.b", func(td *TensorDict) *TensorDict {
			require.NoError(t, td.Del(K("n", "b")))
			require.NoError(t, td.SetNonTensor(K("n", "b"), "x"))
			return td
		}},
		{"leaf shape", "a", func(td *TensorDict) *TensorDict {
			require.NoError(t, td.Set(K("a"), tensor.Zeros(tensor.Float32, 2, 4)))
			return td
		}},
		{"batch size", "root", func(*TensorDict) *TensorDict {
			td := New(3, 1)
			require.NoError(t, td.Set(K("a"), tensor.Zeros(tensor.Float32, 3, 1, 3)))
			require.NoError(t, td.Set(K("n", "b"), tensor.Zeros(tensor.Int64, 3, 1)))
			return td
		}},
	}
	ops := map[string]func([]*TensorDict) error{
		"Stack": func(tds []*TensorDict) error { _, err := Stack(tds, 0); return err },
		"Cat":   func(tds []*TensorDict) error { _, err := Cat(tds, 0); return err },
	}
	for name, op := range ops {
		for _, v := range variants {
			t.Run(name+" "+v.name, func(t *testing.T) {
				err := op([]*TensorDict{base(), v.edit(base())})
				require.ErrorIs(t, err, ErrMismatch)
				assert.Contains(t, err.Error(), v.key)
				assert.Contains(t, err.Error(), "tensordict: "+name)
			})
		}
		require.NoError(t, op([]*TensorDict{base(), base()}), name)
	}
}
