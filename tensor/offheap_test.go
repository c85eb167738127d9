package tensor

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOffHeapStorage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("off-heap storage is implemented on Linux only")
	}
	x, err := EmptyOffHeap(Float32, 1024, 1024)
	require.NoError(t, err)
	st := x.Storage()
	assert.True(t, st.External())
	assert.True(t, st.IsOffHeap())
	assert.Equal(t, 0.0, x.Sum(), "zeroed")
	require.NoError(t, x.AddInPlace(Ones(Float32, 1024)))
	assert.Equal(t, float64(1<<20), x.Sum())
	y := x.Clone()
	assert.False(t, y.Storage().External(), "copies go to the heap")

	require.NoError(t, st.Release())
	require.NoError(t, st.Release(), "idempotent")
	assert.True(t, st.Released())
	_, err = x.Bytes()
	require.EqualError(t, err, "tensor: Bytes: storage was released (closed memory map?)")
	require.ErrorIs(t, err, ErrReleased)
	_, err = x.Add(y)
	require.ErrorIs(t, err, ErrReleased)
	_, err = x.IndexSelect(0, []int{0})
	require.ErrorIs(t, err, ErrReleased)
	assert.Equal(t, "float32[1024 1024] <released>", x.String())
	assert.Equal(t, "tensor(<released>)", x.PythonRepr())
	assert.False(t, x.Equal(x))
	assert.Panics(t, func() { x.Sum() }, "accessors without an error panic, not crash")
	assert.Equal(t, float64(1<<20), y.Sum(), "the copy is unaffected")

	z, err := NewOffHeapStorage(0)
	require.NoError(t, err)
	assert.Equal(t, 0, z.Len())
	require.NoError(t, z.Release())
	_, err = NewOffHeapStorage(-1)
	require.Error(t, err)
}
