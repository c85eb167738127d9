// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package testfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A tmpfs of 64 KiB takes 64 KiB and refuses the next byte.
func TestTmpfsFillsUp(t *testing.T) {
	dir := Tmpfs(t, 64<<10)
	f, err := os.Create(filepath.Join(dir, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Write(make([]byte, 128<<10))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing 128 KiB to a 64 KiB tmpfs: %v, want ENOSPC", err)
	}
}
