package tensor

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/rawbytes"
)

// newOffHeap returns a new off-heap storage of n bytes, released at the end
// of the test.
func newOffHeap(t *testing.T, n int) *Storage {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("off-heap storage is implemented on Linux only")
	}
	st, err := NewOffHeapStorage(n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Release() })
	return st
}

// TestStorageHolding: the registry of live external storages finds the one
// whose memory holds a byte slice, and only while it is live (issue 41
// item 11).
func TestStorageHolding(t *testing.T) {
	a, b := newOffHeap(t, 3<<12), newOffHeap(t, 1<<12)
	ab, bb := a.Bytes(), b.Bytes()
	heap := NewStorage(64)
	for _, c := range []struct {
		name string
		b    []byte
		want *Storage
	}{
		{"all of a", ab, a},
		{"inside a", ab[8:100], a},
		{"a's last byte", ab[len(ab)-1:], a},
		{"all of b", bb, b},
		{"inside b", bb[4096-16 : 4096-8], b},
		{"empty", ab[8:8], nil},
		{"heap", heap.Bytes(), nil},
		{"heap, new", make([]byte, 4096), nil},
	} {
		assert.Same(t, c.want, storageHolding(c.b), c.name)
	}

	child := StorageOf(ab[8:72])
	assert.Same(t, a, child.parent)
	assert.True(t, child.External(), "its memory is off the heap")
	assert.False(t, child.Released())
	x, err := FromStorage(Float64, child, 0, 8)
	require.NoError(t, err)
	require.NoError(t, x.Fill(2))
	assert.Equal(t, 16.0, x.Sum())
	ext := NewExternalStorage(bb[8:16], nil, nil)
	assert.Nil(t, ext.parent, "an external storage has a lifetime of its own, even inside another")
	assert.False(t, ext.recorded, "and is not recorded: ranges do not overlap")
	assert.Same(t, b, storageHolding(bb[8:16]), "the first one made stays the one found")
	assert.Nil(t, StorageOf(heap.Bytes()).parent)

	require.NoError(t, a.Release())
	assert.True(t, child.Released(), "a child is released with its parent")
	assert.Zero(t, child.Len())
	_, err = x.Bytes()
	require.ErrorIs(t, err, ErrReleased)
	_, err = x.Add(x)
	require.ErrorIs(t, err, ErrReleased)
	assert.False(t, rawbytes.Hold(child), "a transfer cannot hold it")
	assert.Nil(t, storageHolding(bb[:0]))
	assert.Same(t, b, storageHolding(bb), "b's range stays")
	for _, m := range mappings.list {
		assert.NotSame(t, a, m.st.Value(), "a's range is forgotten once unmapped")
	}
}

// TestStorageHoldingHold: a hold on a storage over part of an off-heap
// storage holds the off-heap storage, whose Release then leaves the memory
// mapped until the hold ends.
func TestStorageHoldingHold(t *testing.T) {
	a := newOffHeap(t, 1<<12)
	ab := a.Bytes() // for lookups only (they read no memory)
	child := StorageOf(ab[64:128])
	freed := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.freed
	}
	require.True(t, rawbytes.Hold(child))
	require.NoError(t, a.Release())
	assert.True(t, child.Released())
	assert.False(t, freed(), "the memory stays mapped while the child is held")
	assert.Same(t, a, storageHolding(ab), "and recorded")
	rawbytes.Unhold(child)
	assert.True(t, freed(), "the end of the hold unmaps it")
	assert.Nil(t, storageHolding(ab))
}

// TestStorageHoldingCollected: an external storage dropped without Release
// does not stay reachable through the registry, and its range no longer
// counts once it is collected.
func TestStorageHoldingCollected(t *testing.T) {
	mem := make([]byte, 1<<12)
	func() {
		st := NewExternalStorage(mem, nil, nil)
		require.True(t, st.recorded)
		require.Same(t, st, storageHolding(mem))
	}()
	for range 10 {
		runtime.GC()
		if storageHolding(mem) == nil {
			break
		}
	}
	assert.Nil(t, storageHolding(mem), "collected")
	st := NewExternalStorage(mem, nil, nil)
	assert.True(t, st.recorded, "a dead range does not block a new storage")
	assert.Same(t, st, storageHolding(mem[1:]))
	require.NoError(t, st.Release())
	assert.Nil(t, storageHolding(mem))
}
