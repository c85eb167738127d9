// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensordict"
)

// A saved TensorDict's meta.json, in the format Memmap writes.
const (
	metaTail   = `"shape": [], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}`
	leafMember = `{"device": "cpu", "shape": [4], "dtype": "torch.float32", "is_nested": false}`
	nodeMember = `{"type": "TensorDict"}`
)

// metaWith returns a meta.json whose only entry is key, described by member.
func metaWith(key, member string) string {
	return `{"` + key + `": ` + member + `, ` + metaTail
}

// writeFile writes s to path, making its directory.
func writeFile(t *testing.T, path, s string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
}

// TestHostileMemmapDir crafts saved directories that try to make
// LoadMemmap read outside the directory, follow symbolic links, read a
// huge or blocking meta.json, or recurse without bound. Each must be
// refused with an error naming the file, without hanging.
func TestHostileMemmapDir(t *testing.T) {
	mpitest.Need(t, 1)
	leafData := strings.Repeat("\x00\x00\x80\x3f", 4) // float32 ones
	cases := []struct {
		name string
		make func(t *testing.T, root, outside string)
		text string // substring of the error
	}{
		{"../ key", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith("../outside/x", leafMember))
			writeFile(t, filepath.Join(outside, "x.memmap"), leafData)
		}, "../outside/x"},
		{"absolute key", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith(filepath.Join(outside, "x"), leafMember))
			writeFile(t, filepath.Join(outside, "x.memmap"), leafData)
		}, "x"},
		{"../ nested key", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith("..", nodeMember))
		}, ".."},
		{"symlinked tensor file", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith("x", leafMember))
			writeFile(t, filepath.Join(outside, "x.memmap"), leafData)
			require.NoError(t, os.Symlink(filepath.Join(outside, "x.memmap"), filepath.Join(root, "x.memmap")))
		}, "symbolic link"},
		{"symlinked nested directory", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith("n", nodeMember))
			writeFile(t, filepath.Join(outside, "meta.json"), metaWith("x", leafMember))
			writeFile(t, filepath.Join(outside, "x.memmap"), leafData)
			require.NoError(t, os.Symlink(outside, filepath.Join(root, "n")))
		}, "symbolic link"},
		{"symlinked meta.json", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(outside, "meta.json"), metaWith("x", leafMember))
			writeFile(t, filepath.Join(root, "x.memmap"), leafData)
			require.NoError(t, os.Symlink(filepath.Join(outside, "meta.json"), filepath.Join(root, "meta.json")))
		}, "symbolic link"},
		{"100 MB meta.json", func(t *testing.T, root, outside string) {
			path := filepath.Join(root, "meta.json")
			writeFile(t, path, `{"x": `+leafMember+`, "pad": "`)
			require.NoError(t, os.Truncate(path, 100<<20))
		}, "limit"},
		{"1001 nesting levels", func(t *testing.T, root, outside string) {
			dir := root
			for range 1001 {
				writeFile(t, filepath.Join(dir, "meta.json"), metaWith("n", nodeMember))
				dir = filepath.Join(dir, "n")
			}
			writeFile(t, filepath.Join(dir, "meta.json"), `{`+metaTail)
		}, "deeper"},
		{"tensor file shorter than its shape", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith("x", leafMember))
			writeFile(t, filepath.Join(root, "x.memmap"), leafData[:15])
		}, "x.memmap"},
		{"tensor file is a directory", func(t *testing.T, root, outside string) {
			writeFile(t, filepath.Join(root, "meta.json"), metaWith("x", leafMember))
			require.NoError(t, os.Mkdir(filepath.Join(root, "x.memmap"), 0o755))
		}, "x.memmap"},
		// A named pipe must be refused, not opened for reading and
		// waited on until a writer comes.
		{"meta.json is a FIFO", func(t *testing.T, root, outside string) {
			require.NoError(t, os.MkdirAll(root, 0o755))
			require.NoError(t, syscall.Mkfifo(filepath.Join(root, "meta.json"), 0o644))
		}, "meta.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
			c.make(t, root, outside)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			type result struct {
				td  *tensordict.TensorDict
				err error
			}
			ch := make(chan result, 1)
			go func() {
				td, err := tensordict.LoadMemmap(root)
				ch <- result{td, err}
			}()
			var r result
			select {
			case r = <-ch:
			case <-time.After(hangLimit):
				// Unblock a reader stuck opening a FIFO, then fail.
				if f, err := os.OpenFile(filepath.Join(root, "meta.json"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatalf("LoadMemmap still blocked after %v", hangLimit)
			}
			took := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if !assert.Error(t, r.err, "LoadMemmap accepted a hostile directory") {
				_ = r.td.Release()
				return
			}
			t.Logf("%s (%v, %d KiB allocated)", clip(r.err.Error()), took.Round(time.Microsecond), (after.TotalAlloc-before.TotalAlloc)>>10)
			assert.Contains(t, r.err.Error(), "tensordict: LoadMemmap")
			assert.Contains(t, r.err.Error(), c.text)
			// A bound against hanging, not a speed check: 1001 levels are
			// 1001 files to open and parse, on a machine shared by up to
			// 4 ranks per 2 cores (TestHostileMemmapDir runs on each).
			assert.Less(t, took, hangLimit)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "bytes allocated to refuse it")
			assert.Less(t, len(r.err.Error()), maxErrorText)
		})
	}
}
