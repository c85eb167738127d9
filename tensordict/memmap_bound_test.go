package tensordict

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// mappingsOf counts this process's mappings of files under dir.
func mappingsOf(t *testing.T, dir string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(maps), dir+"/")
}

// TestLoadMemmapLoopBounded is issue 41's weaker spot: LoadMemmap of one
// directory in a loop, without Release, kept one mapping per leaf per
// load (20,000 of them). A file mapped again while a shared mapping of it
// is in use reuses that mapping, so the count stays at one per file; a
// Release of one load leaves the others' leaves readable, and the last
// release unmaps.
func TestLoadMemmapLoopBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "td")
	td := New(4)
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float64, 1, 4)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Int32, 2, 4, 3)))
	saved, err := td.Memmap(dir)
	require.NoError(t, err)
	require.NoError(t, saved.Release())
	require.Zero(t, mappingsOf(t, dir))

	var keep []*TensorDict
	for i := range 1000 {
		l, err := LoadMemmap(dir)
		require.NoError(t, err)
		if i%100 == 0 {
			keep = append(keep, l)
		}
	}
	assert.Equal(t, 2, mappingsOf(t, dir), "one mapping per file")

	// The loads share pages: a write through one shows in the others.
	require.NoError(t, keep[0].Fill(5))
	require.NoError(t, keep[0].Release())
	for _, l := range keep[1:] {
		x, err := l.Get(K("n", "b"))
		require.NoError(t, err)
		d, err := tensor.Data[int32](x)
		require.NoError(t, err)
		assert.Equal(t, int32(5), d[11])
	}
	// A copy-on-write load has mappings of its own.
	cow, err := LoadMemmap(dir, CopyOnWrite())
	require.NoError(t, err)
	assert.Equal(t, 4, mappingsOf(t, dir))
	require.NoError(t, cow.Release())
	assert.Equal(t, 2, mappingsOf(t, dir))

	// Mappings that only released loads use are unmapped.
	other := filepath.Join(t.TempDir(), "other")
	m, err := td.Memmap(other)
	require.NoError(t, err)
	l1, err := LoadMemmap(other)
	require.NoError(t, err)
	l2, err := LoadMemmap(other)
	require.NoError(t, err)
	assert.Equal(t, 4, mappingsOf(t, other), "Memmap's own, and the loads' shared ones")
	require.NoError(t, l1.Release())
	require.NoError(t, m.Release())
	assert.Equal(t, 2, mappingsOf(t, other), "l2 still maps the files")
	require.NoError(t, l2.Release())
	assert.Zero(t, mappingsOf(t, other))
}
