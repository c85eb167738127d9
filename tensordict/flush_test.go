package tensordict

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestFlush is issue 43 item 7: Flush syncs every memory-mapped leaf,
// nested ones included, skips leaves that are not mapped and
// copy-on-write mappings, and names the key of a released leaf.
func TestFlush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "td")
	td := New(3)
	require.NoError(t, td.Set(K("a"), tensor.Zeros(tensor.Float64, 3)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Zeros(tensor.Float64, 3, 2)))
	saved, err := td.Memmap(dir)
	require.NoError(t, err)
	defer saved.Release()
	loaded, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer loaded.Release()
	cow, err := LoadMemmap(dir, CopyOnWrite())
	require.NoError(t, err)
	defer cow.Release()
	mixed := saved.Clone() // not mapped
	require.NoError(t, mixed.SetTD(K("mapped"), loaded))

	tests := []struct {
		name string
		td   *TensorDict
		v    float64
	}{
		{"Memmap result", saved, 1},
		{"LoadMemmap result", loaded, 2},
		{"plain leaves around mapped ones", mixed, 3},
		{"copy-on-write", cow, 9}, // never reaches the files
	}
	want := 0.0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.td.Fill(tt.v))
			require.NoError(t, tt.td.Flush())
			if tt.td != cow {
				want = tt.v
			}
			for _, f := range []string{"a.memmap", filepath.Join("n", "b.memmap")} {
				raw, err := os.ReadFile(filepath.Join(dir, f))
				require.NoError(t, err)
				require.NotEmpty(t, raw)
				for i := 0; i < len(raw); i += 8 {
					require.Equal(t, want, math.Float64frombits(binary.LittleEndian.Uint64(raw[i:])), f)
				}
			}
		})
	}
	assert.NoError(t, New(2).Flush(), "no leaves")
	assert.ErrorIs(t, (*TensorDict)(nil).Flush(), ErrNil)

	other, err := td.Memmap(filepath.Join(t.TempDir(), "other"))
	require.NoError(t, err)
	require.NoError(t, other.Release())
	err = other.Flush()
	require.ErrorIs(t, err, tensor.ErrReleased)
	assert.Contains(t, err.Error(), "key a")
}
