package memmapdir

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLockDir: an exclusive lock waits for every other holder; shared
// locks do not wait for each other.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	s1, err := LockDir(dir, false)
	require.NoError(t, err)
	require.True(t, s1.Locked(), "tmpfs and local disks support flock on directories")
	s2, err := LockDir(dir, false)
	require.NoError(t, err, "two shared locks")

	got := make(chan *DirLock)
	go func() {
		x, err := LockDir(dir, true)
		assert.NoError(t, err)
		got <- x
	}()
	select {
	case <-got:
		t.Fatal("the exclusive lock did not wait for the shared ones")
	case <-time.After(200 * time.Millisecond):
	}
	s1.Unlock()
	s2.Unlock()
	s2.Unlock() // idempotent
	var x *DirLock
	select {
	case x = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the exclusive lock was not granted after the shared ones ended")
	}
	require.True(t, x.Locked())
	x.Unlock()
	assert.False(t, x.Locked())

	_, err = LockDir(filepath.Join(dir, "missing"), true)
	require.Error(t, err)
}
