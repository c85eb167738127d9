// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package testfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory and returns it,
// unmounting it when the test ends. It skips the test, saying why, when
// mounting is not allowed (not root, or no CAP_SYS_ADMIN in a container).
func Tmpfs(t testing.TB, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("testfs: Tmpfs: %v", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("testfs: unmount %s: %v", dir, err)
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}
