package tensordict

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// releaseSample returns a TensorDict with a top-level leaf "a" and a
// nested leaf ("n", "b"), of n float64 each.
func releaseSample(t *testing.T, n int) *TensorDict {
	t.Helper()
	td := New()
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float64, 1, n)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Float64, 2, n)))
	return td
}

// readable reports whether the leaf k of td can still be read.
func readable(t *testing.T, td *TensorDict, k Key) error {
	t.Helper()
	x, err := td.Get(k)
	require.NoError(t, err)
	_, err = tensor.Data[float64](x)
	return err
}

// TestReleaseOneRule is issue 41's weaker spot: Release makes the leaves
// of the TensorDicts it owns storage for unreadable (ErrReleased) whatever
// their size (a 16-byte consolidated TensorDict stayed readable), and a
// nested TensorDict sharing its root's storage refuses to release it
// (before, it released the root's storage under the root's other leaves).
func TestReleaseOneRule(t *testing.T) {
	dir := t.TempDir()
	sources := []struct {
		name       string
		make       func(t *testing.T, n int) *TensorDict
		nestedPart bool // GetTD views part of the root's storage
	}{
		{"Consolidate", func(t *testing.T, n int) *TensorDict {
			c, err := releaseSample(t, n).Consolidate()
			require.NoError(t, err)
			return c
		}, true},
		{"FromConsolidated", func(t *testing.T, n int) *TensorDict {
			c, err := releaseSample(t, n).Consolidate()
			require.NoError(t, err)
			meta, err := c.ConsolidatedMetadata()
			require.NoError(t, err)
			b := append([]byte(nil), c.ConsolidatedStorage().Bytes()...)
			td, err := FromConsolidated(tensor.StorageOf(b), meta)
			require.NoError(t, err)
			return td
		}, true},
		{"LoadConsolidated", func(t *testing.T, n int) *TensorDict {
			f := filepath.Join(dir, "c")
			require.NoError(t, releaseSample(t, n).SaveConsolidated(f))
			td, err := LoadConsolidated(f)
			require.NoError(t, err)
			return td
		}, true},
		{"LoadMemmap", func(t *testing.T, n int) *TensorDict {
			d := filepath.Join(dir, "m")
			m, err := releaseSample(t, n).Memmap(d)
			require.NoError(t, err)
			require.NoError(t, m.Release())
			td, err := LoadMemmap(d)
			require.NoError(t, err)
			return td
		}, false},
	}
	for _, src := range sources {
		for _, n := range []int{2, 100, 1 << 17} { // 16 B, 800 B, 1 MiB a leaf
			t.Run(src.name, func(t *testing.T) {
				td := src.make(t, n)
				x, err := td.Get(K("a"))
				require.NoError(t, err)
				require.NoError(t, td.Release())
				require.ErrorIs(t, readable(t, td, K("a")), tensor.ErrReleased, "n=%d", n)
				require.ErrorIs(t, readable(t, td, K("n", "b")), tensor.ErrReleased, "n=%d", n)
				_, err = tensor.Data[float64](x)
				require.ErrorIs(t, err, tensor.ErrReleased, "a tensor taken before")
				assert.Contains(t, td.String(), "<released>")
				require.NoError(t, td.Release(), "idempotent")

				td = src.make(t, n)
				sub, err := td.GetTD(K("n"))
				require.NoError(t, err)
				err = sub.Release()
				if src.nestedPart {
					require.ErrorIs(t, err, ErrShared)
					require.NoError(t, readable(t, sub, K("b")), "nothing released")
				} else {
					require.NoError(t, err)
					require.ErrorIs(t, readable(t, sub, K("b")), tensor.ErrReleased)
				}
				require.NoError(t, readable(t, td, K("a")), "the root's other leaves")
				require.NoError(t, td.Release())
				require.NoError(t, sub.Release(), "after the root's release")
				require.ErrorIs(t, readable(t, sub, K("b")), tensor.ErrReleased)
			})
		}
	}
	// Tensors the caller stored are the caller's: Release leaves them.
	plain := releaseSample(t, 2)
	require.NoError(t, plain.Release())
	require.NoError(t, readable(t, plain, K("a")))
}
