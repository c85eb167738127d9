package memmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestReadFile: a tensor read into memory does not depend on its file.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.memmap")
	m, err := FromTensor(tensor.Full(tensor.Int32, 7, 3, 2), path)
	require.NoError(t, err)
	require.NoError(t, Close(m))

	x, err := ReadFile(path, tensor.Int32, []int{3, 2})
	require.NoError(t, err)
	assert.False(t, Is(x))
	require.NoError(t, os.Truncate(path, 0))
	assert.True(t, x.EqScalar(7).All(), "the file was truncated; the copy was not")

	_, err = ReadFile(path, tensor.Int32, []int{3, 2})
	require.ErrorContains(t, err, "file has 0 bytes")
	empty, err := ReadFile(filepath.Join(dir, "missing"), tensor.Int32, []int{0, 2})
	require.NoError(t, err, "an empty tensor needs no file")
	assert.Equal(t, []int{0, 2}, empty.Shape())
	require.NoError(t, os.Symlink(path, filepath.Join(dir, "link")))
	_, err = ReadFile(filepath.Join(dir, "link"), tensor.Int32, []int{1})
	require.ErrorContains(t, err, "symbolic link")
}
