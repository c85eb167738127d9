// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and returns
// it; the test's cleanup unmounts it. It skips the test when mounting is
// not allowed (not root, or no CAP_SYS_ADMIN in a container).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	require.NoError(t, os.Mkdir(dir, 0o755))
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (needs root and CAP_SYS_ADMIN): %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// diskTD returns a TensorDict of four int32 leaves (two nested) of about
// total bytes, leaf i filled with i+1.
func diskTD(t *testing.T, total int) *tensordict.TensorDict {
	t.Helper()
	td := tensordict.New()
	keys := []tensordict.Key{tensordict.K("a"), tensordict.K("b"), tensordict.K("n", "c"), tensordict.K("n", "d")}
	for i, k := range keys {
		require.NoError(t, td.Set(k, tensor.Full(tensor.Int32, float64(i+1), max(1, total/16))))
	}
	return td
}

// TestMemmapFullDisk saves TensorDicts of growing size into a 1 MiB
// tmpfs: each save either succeeds and loads back equal, or returns an
// error that wraps ENOSPC and leaves a directory that does not load.
func TestMemmapFullDisk(t *testing.T) {
	mpitest.Need(t, 1)
	const fsSize = 1 << 20
	fs := mountTmpfs(t, fsSize)
	var ok, full int
	for total := 512 << 10; total <= 1536<<10; total += 64 << 10 {
		dir := filepath.Join(fs, fmt.Sprintf("save-%d", total))
		td := diskTD(t, total)
		out, err := td.Memmap(dir)
		if err == nil {
			ok++
			got, lerr := tensordict.LoadMemmap(dir)
			require.NoError(t, lerr, "a save that succeeded must load (%d bytes)", total)
			require.NoError(t, tensordict.DiffStructure(td, got))
			for i, k := range got.Keys(tensordict.LeavesOnly(), tensordict.IncludeNested(), tensordict.Sorted()) {
				x, _ := got.Get(k)
				v, _ := tensor.Data[int32](x)
				assert.Equal(t, int32(i+1), v[len(v)-1], "key %v", k)
			}
			require.NoError(t, got.Release())
			require.NoError(t, out.Release())
		} else {
			full++
			t.Logf("%d KiB: %v", total>>10, err)
			assert.True(t, errors.Is(err, syscall.ENOSPC), "a failed save wraps ENOSPC: %v", err)
			got, lerr := tensordict.LoadMemmap(dir)
			if !assert.Error(t, lerr, "the directory of a failed save (%d bytes) must not load", total) {
				_ = got.Release()
			}
		}
		require.NoError(t, os.RemoveAll(dir))
	}
	t.Logf("%d saves fit in the %d KiB tmpfs, %d returned ENOSPC", ok, fsSize>>10, full)
	assert.NotZero(t, ok, "saves that fit")
	assert.NotZero(t, full, "saves that did not fit")
}

// Helper modes of the disk tests, run in a child process without MPI.
const (
	helperExpandFull  = "memmap-expand-full" // Memmap of an expanded leaf into a full file system
	helperTruncRead   = "truncated-read"     // read a mapped file truncated by another process, SetPanicOnFault on
	helperTruncNoRcvr = "truncated-read-raw" // the same without SetPanicOnFault: the process dies
)

func init() {
	localHelpers[helperExpandFull] = runExpandFull
	localHelpers[helperTruncRead] = func() int { return runTruncatedRead(true) }
	localHelpers[helperTruncNoRcvr] = func() int { return runTruncatedRead(false) }
}

// runExpandFull saves a TensorDict whose leaf is an Expand view (not
// contiguous: Memmap copies it through the mapping, not with write(2))
// into envDir, a file system too small for it, and prints the error.
func runExpandFull() int {
	row := tensor.Ones(tensor.Float32, 1, 1<<18) // 1 MiB
	big, err := row.Expand(4, 1<<18)             // 4 MiB, stride 0
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	td := tensordict.New()
	if err := td.Set(tensordict.K("x"), big); err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	_, err = td.Memmap(filepath.Join(os.Getenv(envDir), "expanded"))
	fmt.Printf("Memmap: ENOSPC=%v: %v\n", errors.Is(err, syscall.ENOSPC), err)
	return exitOK
}

// runTruncatedRead maps a saved leaf, has another process truncate its
// file to zero, and reads the leaf.
func runTruncatedRead(panicOnFault bool) int {
	dir := filepath.Join(os.Getenv(envDir), "saved")
	td := tensordict.New()
	if err := td.Set(tensordict.K("x"), tensor.Ones(tensor.Uint8, 1<<20)); err != nil {
		return exitSetup
	}
	if _, err := td.Memmap(dir); err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	got, err := tensordict.LoadMemmap(dir)
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	leaf, _ := got.Get(tensordict.K("x"))
	if out, err := exec.Command("truncate", "-s", "0", filepath.Join(dir, "x.memmap")).CombinedOutput(); err != nil {
		fmt.Println("setup: truncate:", err, string(out))
		return exitSetup
	}
	debug.SetPanicOnFault(panicOnFault)
	sum, err := func() (sum int, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("recovered: %v", r)
				if re, ok := r.(interface{ Addr() uintptr }); ok {
					err = fmt.Errorf("%w (fault address %#x)", err, re.Addr())
				}
			}
		}()
		b, err := leaf.Bytes()
		if err != nil {
			return 0, err
		}
		for _, c := range b {
			sum += int(c)
		}
		return sum, nil
	}()
	fmt.Printf("read: sum=%d err=%v\n", sum, err)
	if _, lerr := tensordict.LoadMemmap(dir); lerr != nil {
		fmt.Printf("LoadMemmap: %v\n", lerr)
	}
	return exitOK
}

// runLocalHelper runs this test binary as helper mode with envDir=dir and
// returns its combined output and exit code.
func runLocalHelper(t *testing.T, mode, dir string) (string, int) {
	t.Helper()
	return startLocalHelper(t, mode, dir, 60*time.Second)()
}

// TestMemmapExpandedLeafFullDisk: Memmap of a leaf that is not contiguous
// into a full file system must return ENOSPC like a contiguous one. Such a
// leaf is copied into the new file's mapping, not written with write(2),
// and a tmpfs or disk that has no room for a page answers a store into a
// mapping with SIGBUS; the file's blocks must therefore be reserved
// (fallocate) before it is mapped.
func TestMemmapExpandedLeafFullDisk(t *testing.T) {
	mpitest.Need(t, 1)
	fs := mountTmpfs(t, 1<<20)
	out, code := runLocalHelper(t, helperExpandFull, fs)
	t.Logf("child exit %d:\n%s", code, clipLines(out, 12))
	assert.Equal(t, exitOK, code, "the child survives a full file system")
	assert.Contains(t, out, "Memmap: ENOSPC=true")
}

// TestMappedFileTruncated documents what happens when another process
// truncates a file a loaded TensorDict maps: reading the lost pages raises
// SIGBUS. The library cannot check every access through a slice, so:
//
//   - with debug.SetPanicOnFault(true) on the reading goroutine, the Go
//     runtime turns the fault into a panic that recover catches (a
//     runtime.Error with the fault address);
//   - without it, the process dies (fatal error: fault, signal SIGBUS);
//   - LoadMemmap of the truncated directory returns an error naming the
//     file and its sizes.
func TestMappedFileTruncated(t *testing.T) {
	mpitest.Need(t, 1)
	if _, err := exec.LookPath("truncate"); err != nil {
		t.Skip("needs truncate(1) to shrink the file from another process")
	}
	t.Run("SetPanicOnFault", func(t *testing.T) {
		out, code := runLocalHelper(t, helperTruncRead, t.TempDir())
		t.Logf("child exit %d:\n%s", code, clipLines(out, 8))
		assert.Equal(t, exitOK, code)
		assert.Regexp(t, `read: sum=0 err=recovered: runtime error: invalid memory address or nil pointer dereference \(fault address 0x[0-9a-f]+\)`, out)
		assert.Regexp(t, `LoadMemmap: .*x\.memmap.*0 bytes`, out)
	})
	t.Run("default", func(t *testing.T) {
		out, code := runLocalHelper(t, helperTruncNoRcvr, t.TempDir())
		t.Logf("child exit %d:\n%s", code, clipLines(out, 8))
		assert.NotEqual(t, exitOK, code, "reading a truncated mapping kills the process")
		assert.Contains(t, out, "SIGBUS")
		assert.NotContains(t, out, "read: sum=")
	})
	t.Run("LoadMemmap", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "saved")
		td := diskTD(t, 64<<10)
		out, err := td.Memmap(dir)
		require.NoError(t, err)
		require.NoError(t, out.Release())
		file := filepath.Join(dir, "n", "c.memmap")
		require.NoError(t, os.Truncate(file, 1000))
		_, err = tensordict.LoadMemmap(dir)
		require.Error(t, err)
		t.Logf("%v", err)
		assert.Contains(t, err.Error(), file)
		assert.Contains(t, err.Error(), "1000 bytes")
	})
}

// clipLines keeps the first n lines of s.
func clipLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines[n] = "..."
	}
	return strings.Join(lines, "\n")
}
