package memmap

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestSpecialFilesRefused: FromFile and ReadFile open their file through
// internal/memmapdir's OpenRegular, whose tests cover every kind of
// special file; here a named pipe and a symbolic link to one are refused,
// naming the file, without blocking.
func TestSpecialFilesRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"named pipe", func(t *testing.T, p string) {
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, "named pipe"},
		{"symbolic link to a named pipe", func(t *testing.T, p string) {
			require.NoError(t, syscall.Mkfifo(p+".fifo", 0o644))
			require.NoError(t, os.Symlink(p+".fifo", p))
		}, "symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x")
			c.make(t, path)
			check := func(what string, f func() error) {
				done := make(chan error, 1)
				go func() { done <- f() }()
				select {
				case err := <-done:
					require.Error(t, err, what)
					assert.Contains(t, err.Error(), path, what)
					assert.Contains(t, err.Error(), c.want, what)
				case <-time.After(3 * time.Second):
					// Let the blocked reader finish before failing.
					if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
					t.Fatalf("%s: still blocked after 3s", what)
				}
			}
			check("ReadFile", func() error { _, err := ReadFile(path, tensor.Uint8, []int{16}); return err })
			for _, opts := range [][]Option{nil, {Private()}} {
				check("FromFile", func() error {
					m, err := FromFile(path, tensor.Uint8, []int{16}, opts...)
					if err == nil {
						_ = Close(m)
					}
					return err
				})
			}
		})
	}
}
