package memmap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/internal/testfs"
	"github.com/tdmpi/tdmpi/tensor"
)

// withoutFallocate makes reserve take its fallback, as on a file system
// without fallocate, until the test ends.
func withoutFallocate(t *testing.T) {
	saved := fallocate
	fallocate = func(int, uint32, int64, int64) error { return unix.EOPNOTSUPP }
	t.Cleanup(func() { fallocate = saved })
}

// expanded returns a float32 tensor of rows×(1<<16) ones (256 KiB a row)
// that is an Expand view of one row, so not contiguous.
func expanded(t *testing.T, rows int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.Ones(tensor.Float32, 1, 1<<16).Expand(rows, 1<<16)
	require.NoError(t, err)
	require.False(t, x.IsContiguous())
	return x
}

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// TestFullDiskIsENOSPC creates tensors too large for a 1 MiB tmpfs in
// every way the package can: each returns an error that wraps ENOSPC and
// names the file, leaves no file behind, and does not kill the process
// with SIGBUS (which storing into an unreserved mapping would).
func TestFullDiskIsENOSPC(t *testing.T) {
	const mib = 1 << 20
	fs := testfs.Tmpfs(t, mib)
	cases := []struct {
		name string
		make func(path string, opts ...Option) (*tensor.Tensor, error)
	}{
		{"FromTensor contiguous", func(p string, o ...Option) (*tensor.Tensor, error) {
			return FromTensor(tensor.Ones(tensor.Float32, 8, 1<<16), p, o...)
		}},
		{"FromTensor expanded", func(p string, o ...Option) (*tensor.Tensor, error) {
			return FromTensor(expanded(t, 8), p, o...)
		}},
		{"Empty", func(p string, o ...Option) (*tensor.Tensor, error) {
			return Empty(tensor.Float32, p, []int{8, 1 << 16}, o...)
		}},
		{"Zeros", func(p string, o ...Option) (*tensor.Tensor, error) {
			return Zeros(tensor.Uint8, p, []int{2 * mib}, o...)
		}},
		{"Full", func(p string, o ...Option) (*tensor.Tensor, error) {
			return Full(tensor.Int64, 3, p, []int{mib / 4}, o...)
		}},
	}
	for _, fallback := range []bool{false, true} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/fallback=%v", c.name, fallback), func(t *testing.T) {
				if fallback {
					withoutFallocate(t)
				}
				path := filepath.Join(fs, "x.memmap")
				m, err := c.make(path)
				if err == nil {
					_ = Close(m)
				}
				require.Error(t, err)
				t.Log(err)
				assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
				assert.Contains(t, err.Error(), path)
				assert.Empty(t, entries(t, fs), "the partial file is removed")

				// Replacing an existing file (ExistsOK) fails the same
				// way, and keeps the old file and its content.
				old := []byte("old content")
				require.NoError(t, os.WriteFile(path, old, 0o644))
				m, err = c.make(path, ExistsOK())
				if err == nil {
					_ = Close(m)
				}
				require.Error(t, err)
				assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
				got, rerr := os.ReadFile(path)
				require.NoError(t, rerr)
				assert.Equal(t, old, got)
				assert.Equal(t, []string{"x.memmap"}, entries(t, fs), "the temporary file is removed")
				require.NoError(t, os.Remove(path))
			})
		}
	}
}

// TestExpandedFitsOnSmallDisk: a non-contiguous tensor that fits is
// written in full, with and without fallocate.
func TestExpandedFitsOnSmallDisk(t *testing.T) {
	fs := testfs.Tmpfs(t, 1<<20)
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			if fallback {
				withoutFallocate(t)
			}
			path := filepath.Join(fs, "x.memmap")
			m, err := FromTensor(expanded(t, 3), path)
			require.NoError(t, err)
			require.NoError(t, Flush(m))
			require.NoError(t, Close(m))
			back, err := FromFile(path, tensor.Float32, []int{3, 1 << 16})
			require.NoError(t, err)
			d, err := tensor.Data[float32](back)
			require.NoError(t, err)
			for i, v := range d {
				if v != 1 {
					t.Fatalf("element %d is %v, want 1", i, v)
				}
			}
			require.NoError(t, Close(back))
			require.NoError(t, os.Remove(path))
		})
	}
}

// TestEmptyHoldsItsBlocks: once Empty returns, its file's blocks are
// reserved: another file filling the file system cannot take them, and
// storing into every page of the mapping afterwards does not fault.
func TestEmptyHoldsItsBlocks(t *testing.T) {
	fs := testfs.Tmpfs(t, 1<<20)
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			if fallback {
				withoutFallocate(t)
			}
			path := filepath.Join(fs, "e.memmap")
			m, err := Empty(tensor.Uint8, path, []int{512 << 10})
			require.NoError(t, err)
			hog := filepath.Join(fs, "hog")
			err = os.WriteFile(hog, make([]byte, 1<<20), 0o644)
			require.True(t, errors.Is(err, syscall.ENOSPC), "the rest of the file system fills up: %v", err)
			b, err := m.Bytes()
			require.NoError(t, err)
			for i := range b {
				b[i] = byte(i)
			}
			require.NoError(t, Flush(m))
			require.NoError(t, Close(m))
			require.NoError(t, os.Remove(hog))
			require.NoError(t, os.Remove(path))
		})
	}
}

// TestAnonymousFullDisk: an anonymous mapping goes to os.TempDir when the
// shared-memory directory is too small, and returns ENOSPC when neither
// has room.
func TestAnonymousFullDisk(t *testing.T) {
	shm := testfs.Tmpfs(t, 256<<10)
	tmp := testfs.Tmpfs(t, 1<<20)
	saved := anonDirs
	anonDirs = []string{shm}
	t.Cleanup(func() { anonDirs = saved })
	t.Setenv("TMPDIR", tmp)

	m, err := FromTensor(expanded(t, 2), "")
	require.NoError(t, err, "512 KiB fits in TMPDIR")
	d, err := tensor.Data[float32](m)
	require.NoError(t, err)
	assert.Equal(t, float32(1), d[len(d)-1])
	require.NoError(t, Close(m))

	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			if fallback {
				withoutFallocate(t)
			}
			_, err := FromTensor(expanded(t, 8), "")
			require.Error(t, err)
			t.Log(err)
			assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
			assert.Contains(t, err.Error(), tmp)
			_, err = Empty(tensor.Float32, "", []int{8, 1 << 16})
			assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
			assert.Empty(t, entries(t, shm))
			assert.Empty(t, entries(t, tmp))
		})
	}
}
