package memmapdir

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within runs f and fails the test if it has not returned after d; a
// reader blocked on a named pipe would otherwise hang the test binary.
func within(t *testing.T, d time.Duration, unblock string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		// Open the pipe for writing so the blocked reader can finish.
		if w, err := os.OpenFile(unblock, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatalf("still blocked after %v", d)
		return nil
	}
}

// TestSpecialFilesRefused: ReadMeta and OpenRegular (read-only and
// read-write, as package memmap's FromFile calls it) refuse every file that
// is not a regular one, naming it, without blocking on a named pipe or
// opening a device.
func TestSpecialFilesRefused(t *testing.T) {
	_, err := os.Stat("/dev/zero")
	haveZero := err == nil
	cases := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"named pipe", func(t *testing.T, p string) {
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, "named pipe"},
		{"directory", func(t *testing.T, p string) {
			require.NoError(t, os.Mkdir(p, 0o755))
		}, "directory"},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("cannot make a unix socket: %v", err)
			}
			t.Cleanup(func() { l.Close() })
		}, "socket"},
		{"symbolic link to /dev/zero", func(t *testing.T, p string) {
			require.NoError(t, os.Symlink("/dev/zero", p))
		}, "symbolic link"},
		{"symbolic link to a named pipe", func(t *testing.T, p string) {
			require.NoError(t, syscall.Mkfifo(p+".fifo", 0o644))
			require.NoError(t, os.Symlink(p+".fifo", p))
		}, "symbolic link"},
	}
	if haveZero {
		cases = append(cases, struct {
			name string
			make func(t *testing.T, path string)
			want string
		}{"/dev/zero", nil, "character device"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := "/dev/zero"
			if c.make != nil {
				path = filepath.Join(t.TempDir(), "x")
				c.make(t, path)
			}
			check := func(what string, f func() error) {
				err := within(t, 3*time.Second, path, f)
				require.Error(t, err, what)
				t.Logf("%s: %v", what, err)
				assert.Contains(t, err.Error(), path, what)
				assert.Contains(t, err.Error(), c.want, what)
			}
			check("ReadMeta", func() error { _, err := ReadMeta(path); return err })
			for _, flag := range []int{os.O_RDONLY, os.O_RDWR} {
				check("OpenRegular", func() error {
					f, _, err := OpenRegular("test", path, flag)
					if err == nil {
						f.Close()
					}
					return err
				})
			}
		})
	}
}

// TestFIFOSwappedInAfterLstat: a named pipe put in place of the file
// after the Lstat check is still refused, by fstat of the descriptor opened
// with O_NONBLOCK, without blocking: openFstat, the part of OpenRegular
// (and so of ReadMeta) after that check, refuses a named pipe for reading
// and for writing.
func TestFIFOSwappedInAfterLstat(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetaFile)
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR} {
		err := within(t, 3*time.Second, path, func() error {
			f, _, err := openFstat("test", path, flag)
			if err == nil {
				f.Close()
			}
			return err
		})
		require.Error(t, err)
		assert.ErrorIs(t, err, errNotRegular)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "named pipe")
	}
}
