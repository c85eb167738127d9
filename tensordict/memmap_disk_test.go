package tensordict

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/internal/testfs"
	"github.com/tdmpi/tdmpi/tensor"
)

// tempFiles returns the temporary files (".*.tmp") left under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var tmp []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			tmp = append(tmp, p)
		}
		return err
	})
	require.NoError(t, err)
	return tmp
}

// memmapFiles returns the tensor files (".memmap") under dir.
func memmapFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".memmap") {
			files = append(files, p)
		}
		return err
	})
	require.NoError(t, err)
	return files
}

// TestMemmapFullDiskENOSPC: Memmap, MemmapInPlace and MemmapLike of a
// TensorDict too large for a 1 MiB tmpfs return an error wrapping ENOSPC
// that names the leaf, whether the leaves are contiguous or Expand views
// (copied through the mapping, which would die with SIGBUS without the
// blocks reserved). The source is untouched and the directory does not
// load.
func TestMemmapFullDiskENOSPC(t *testing.T) {
	fs := testfs.Tmpfs(t, 1<<20)
	build := func(t *testing.T, expand bool) *TensorDict {
		td := New(4)
		for _, k := range []Key{K("a"), K("n", "b")} {
			x := tensor.Ones(tensor.Float32, 4, 1<<16) // 1 MiB
			if expand {
				var err error
				x, err = tensor.Ones(tensor.Float32, 1, 1<<16).Expand(4, 1<<16)
				require.NoError(t, err)
			}
			require.NoError(t, td.Set(k, x))
		}
		return td
	}
	for _, op := range []string{"Memmap", "MemmapInPlace", "MemmapLike"} {
		for _, expand := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/expand=%v", op, expand), func(t *testing.T) {
				td := build(t, expand)
				before, _ := td.Get(K("a"))
				dir := filepath.Join(fs, "td")
				var err error
				switch op {
				case "Memmap":
					_, err = td.Memmap(dir)
				case "MemmapInPlace":
					_, err = td.MemmapInPlace(dir)
				case "MemmapLike":
					_, err = td.MemmapLike(dir)
				}
				require.Error(t, err)
				t.Log(err)
				assert.True(t, errors.Is(err, syscall.ENOSPC), "wraps ENOSPC: %v", err)
				assert.Contains(t, err.Error(), "tensordict: "+op)
				assert.Contains(t, err.Error(), ".memmap")
				after, _ := td.Get(K("a"))
				assert.Same(t, before, after, "the source keeps its leaf")
				assert.False(t, td.IsMemmap())
				_, lerr := LoadMemmap(dir)
				assert.Error(t, lerr, "a failed save does not load")
				assert.Empty(t, tempFiles(t, fs))
				assert.Empty(t, memmapFiles(t, fs), "a failed save removes the files it wrote")
				require.NoError(t, os.RemoveAll(dir))

				// The file system is usable afterwards.
				small := New()
				x, err := tensor.Ones(tensor.Float32, 1, 1<<10).Expand(8, 1<<10)
				require.NoError(t, err)
				require.NoError(t, small.Set(K("x"), x))
				out, err := small.Memmap(dir)
				require.NoError(t, err)
				require.NoError(t, out.Release())
				back, err := LoadMemmap(dir)
				require.NoError(t, err)
				require.NoError(t, DiffStructure(small, back))
				require.NoError(t, back.Release())
				require.NoError(t, os.RemoveAll(dir))
			})
		}
	}
}

// loadWithin runs LoadMemmap and fails the test if it blocks: a reader
// waiting on a named pipe would otherwise hang the test binary.
func loadWithin(t *testing.T, dir string, fifos []string, opts ...LoadOption) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		td, err := LoadMemmap(dir, opts...)
		if err == nil {
			_ = td.Release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(3 * time.Second):
		for _, p := range fifos { // let the blocked reader finish
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		t.Fatalf("LoadMemmap %s still blocked after 3 s", dir)
		return nil
	}
}

// TestLoadMemmapSpecialFiles replaces a file of a saved directory by a
// named pipe, a directory, a device or a symbolic link to one: LoadMemmap
// refuses each at once with an error naming the file, and never blocks or
// maps it.
func TestLoadMemmapSpecialFiles(t *testing.T) {
	fifo := func(t *testing.T, p string) {
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	}
	for _, tc := range []struct {
		name string
		file string // relative to the saved directory
		make func(t *testing.T, p string)
		want string
	}{
		{"root meta.json is a FIFO", "meta.json", fifo, "named pipe"},
		{"nested meta.json is a FIFO", "n/meta.json", fifo, "named pipe"},
		{"non-tensor meta.json is a FIFO", "n/s/meta.json", fifo, "named pipe"},
		{"tensor file is a FIFO", "x.memmap", fifo, "named pipe"},
		{"nested tensor file is a FIFO", "n/y.memmap", fifo, "named pipe"},
		{"tensor file is a directory", "x.memmap", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}, "directory"},
		{"meta.json is a directory", "n/meta.json", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}, "directory"},
		{"tensor file links to /dev/zero", "x.memmap", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink("/dev/zero", p))
		}, "symbolic link"},
		{"meta.json links to a FIFO", "meta.json", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p+".fifo", 0o644))
			require.NoError(t, os.Symlink(p+".fifo", p))
		}, "symbolic link"},
		{"tensor file is a character device", "x.memmap", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			if err := unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
				t.Skipf("cannot make a device node (needs CAP_MKNOD): %v", err)
			}
		}, "character device"},
	} {
		for _, cow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cow=%v", tc.name, cow), func(t *testing.T) {
				dir := saveSmall(t)
				p := filepath.Join(dir, filepath.FromSlash(tc.file))
				tc.make(t, p)
				var opts []LoadOption
				if cow {
					opts = append(opts, CopyOnWrite())
				}
				start := time.Now()
				err := loadWithin(t, dir, []string{p, p + ".fifo"}, opts...)
				require.Error(t, err)
				t.Logf("%v (%v)", err, time.Since(start).Round(time.Microsecond))
				assert.True(t, strings.HasPrefix(err.Error(), "tensordict: LoadMemmap: "), err.Error())
				assert.Contains(t, err.Error(), p)
				assert.Contains(t, err.Error(), tc.want)
			})
		}
	}
	t.Run("SubPath to a FIFO meta.json", func(t *testing.T) {
		dir := saveSmall(t)
		p := filepath.Join(dir, "n", "meta.json")
		fifo(t, p)
		err := loadWithin(t, dir, []string{p}, SubPath("n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), p)
		assert.Contains(t, err.Error(), "named pipe")
	})
}
