package memmap

import (
	"errors"
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
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
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

// TestExpandedFitsOnSmallDisk: a non-contiguous tensor that fits is
// written in full.
func TestExpandedFitsOnSmallDisk(t *testing.T) {
	fs := testfs.Tmpfs(t, 1<<20)
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
}

// TestEmptyHoldsItsBlocks: once Empty returns, its file's blocks are
// reserved: another file filling the file system cannot take them, and
// storing into every page of the mapping afterwards does not fault.
func TestEmptyHoldsItsBlocks(t *testing.T) {
	fs := testfs.Tmpfs(t, 1<<20)
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
}

// TestReserveFallback: where the file system has no fallocate (EOPNOTSUPP
// or ENOSYS), reserve writes zeros, which allocates the blocks as
// fallocate does: another file filling the file system cannot take them,
// and storing into every page of a shared mapping does not fault. On a
// full file system it returns an error wrapping ENOSPC. Another error of
// fallocate is returned, and nothing is written. (tmpfs has fallocate:
// afterFallocate is called with the error a file system without it
// returns.)
func TestReserveFallback(t *testing.T) {
	fs := testfs.Tmpfs(t, 1<<20)
	newFile := func(t *testing.T, name string) *os.File {
		f, err := os.Create(filepath.Join(fs, name))
		require.NoError(t, err)
		t.Cleanup(func() {
			f.Close()
			require.NoError(t, os.Remove(f.Name()))
		})
		return f
	}
	size := func(t *testing.T, f *os.File) int64 {
		fi, err := f.Stat()
		require.NoError(t, err)
		return fi.Size()
	}
	for _, unsupported := range []error{unix.EOPNOTSUPP, unix.ENOSYS} {
		t.Run(unsupported.Error(), func(t *testing.T) {
			const n = 512 << 10
			f := newFile(t, "e")
			require.NoError(t, afterFallocate(f, n, unsupported))
			require.EqualValues(t, n, size(t, f))
			hog := newFile(t, "hog")
			_, err := hog.Write(make([]byte, 1<<20))
			require.True(t, errors.Is(err, syscall.ENOSPC), "the rest of the file system fills up: %v", err)
			b, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			require.NoError(t, err)
			for i := range b {
				b[i] = byte(i)
			}
			require.NoError(t, unix.Munmap(b))
			require.NoError(t, hog.Truncate(0))

			err = afterFallocate(newFile(t, "big"), 2<<20, unsupported)
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
		})
	}
	f := newFile(t, "x")
	err := afterFallocate(f, 4096, unix.EIO)
	assert.ErrorIs(t, err, unix.EIO)
	assert.ErrorContains(t, err, "fallocate")
	assert.Zero(t, size(t, f), "written after a failed fallocate")
	require.NoError(t, afterFallocate(f, 4096, nil))
	assert.Zero(t, size(t, f), "written after fallocate succeeded")
}

// TestAnonymousFullDisk: the file behind an anonymous mapping goes to the
// fallback directory when the preferred one is too small, and a mapping
// that neither has room for is an error wrapping ENOSPC that names the
// fallback, which FromTensor and Empty return, leaving no file behind.
func TestAnonymousFullDisk(t *testing.T) {
	shm := testfs.Tmpfs(t, 256<<10)
	tmp := testfs.Tmpfs(t, 1<<20)
	const n = 512 << 10
	f, err := anonFile(shm, tmp, n, reserve)
	require.NoError(t, err, "512 KiB fits in the fallback")
	var got, want unix.Stat_t
	require.NoError(t, unix.Fstat(int(f.Fd()), &got))
	require.NoError(t, unix.Stat(tmp, &want))
	assert.Equal(t, want.Dev, got.Dev, "the file is not in the fallback")
	assert.EqualValues(t, n, got.Size)
	require.NoError(t, f.Close())

	_, err = anonFile(shm, tmp, 2<<20, reserve)
	require.Error(t, err)
	t.Log(err)
	assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
	assert.Contains(t, err.Error(), tmp)
	assert.Empty(t, entries(t, shm))
	assert.Empty(t, entries(t, tmp))

	// The package's anonymous mappings: larger than shmDir can hold, and
	// than a TMPDIR of 1 MiB. (Expanded, the tensor takes 256 KiB.)
	var st unix.Statfs_t
	rows := 8
	if unix.Statfs(shmDir, &st) == nil {
		rows = max(rows, int(2*st.Blocks*uint64(st.Bsize)>>18))
	}
	t.Setenv("TMPDIR", tmp)
	_, err = FromTensor(expanded(t, rows), "")
	require.Error(t, err)
	t.Log(err)
	assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
	assert.Contains(t, err.Error(), tmp)
	_, err = Empty(tensor.Float32, "", []int{rows, 1 << 16})
	assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
	assert.Empty(t, entries(t, tmp))
}
