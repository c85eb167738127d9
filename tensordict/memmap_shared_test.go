package tensordict_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// TestMemmapSharedBetweenRanks has two processes map one saved TensorDict:
// each writes in place and flushes, and the other sees the change through the
// mapping it already holds. Checks use assert, not require, so that both ranks
// always reach every barrier.
func TestMemmapSharedBetweenRanks(t *testing.T) {
	g := mpitest.Need(t, 2)
	// Rank 0 makes the folder and tells rank 1 its name (same node: mpirun on
	// one machine). The broadcast is over the world, so every rank takes
	// part (MPICH hangs when ranks 2 and 3 skip it; Open MPI let it pass).
	var name [512]byte
	var dir string
	if g.Rank() == 0 {
		dir = t.TempDir()
		copy(name[:], dir)
	}
	require.NoError(t, mpi.Bcast(g.Comm(), name[:], 0))
	if g.Rank() > 1 {
		// Only ranks 0 and 1 share the files; the others keep step.
		for range 4 {
			require.NoError(t, g.Barrier())
		}
		return
	}
	if g.Rank() == 1 {
		dir = string(name[:clen(name[:])])
	}
	prefix := filepath.Join(dir, "td")

	if g.Rank() == 0 {
		td := tensordict.New(4)
		assert.NoError(t, td.Set(tensordict.K("obs", "x"), tensor.Zeros(tensor.Float32, 4, 2)))
		assert.NoError(t, td.Set(tensordict.K("step"), tensor.Zeros(tensor.Int64, 4)))
		_, err := td.Memmap(prefix)
		assert.NoError(t, err)
	}
	require.NoError(t, g.Barrier()) // 1: saved

	td, err := tensordict.LoadMemmap(prefix)
	require.NoError(t, err, "rank %d loads %s", g.Rank(), prefix)
	assert.True(t, td.IsMemmap())
	x, err := td.Get(tensordict.K("obs", "x"))
	require.NoError(t, err)
	step, err := td.Get(tensordict.K("step"))
	require.NoError(t, err)

	if g.Rank() == 0 {
		x.SetAt(7.5, 3, 1)
		assert.NoError(t, memmap.Flush(x))
	}
	require.NoError(t, g.Barrier()) // 2: rank 0 wrote
	assert.Equal(t, 7.5, x.At(3, 1), "rank %d sees rank 0's write", g.Rank())

	if g.Rank() == 1 {
		step.SetAt(42, 0)
		assert.NoError(t, memmap.Flush(step))
	}
	require.NoError(t, g.Barrier()) // 3: rank 1 wrote
	assert.Equal(t, 42.0, step.At(0), "rank %d sees rank 1's write", g.Rank())

	// A fresh load from disk sees both writes too.
	again, err := tensordict.LoadMemmap(prefix)
	if assert.NoError(t, err) {
		x2, _ := again.Get(tensordict.K("obs", "x"))
		s2, _ := again.Get(tensordict.K("step"))
		assert.Equal(t, 7.5, x2.At(3, 1))
		assert.Equal(t, 42.0, s2.At(0))
	}
	require.NoError(t, g.Barrier()) // 4: both done before rank 0 removes the folder
	if g.Rank() == 0 {
		_ = os.RemoveAll(dir)
	}
}

// clen returns the length of the NUL-terminated string in b.
func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
