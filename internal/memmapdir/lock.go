package memmapdir

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DirLock is an advisory lock (flock) on a directory of a saved
// TensorDict: package tensordict's writers hold it exclusively while they
// rewrite the directory, and its readers hold it shared while they load,
// so that a load never mixes two saves and two saves never interleave.
// Other programs (Python tensordict) do not take it.
type DirLock struct {
	f *os.File // nil: the file system does not support the lock
}

// LockDir takes the lock on the directory dir, exclusive or shared, and
// waits for it as long as another holder keeps it. It returns an error if
// dir cannot be opened as a directory. On a
// file system that does not support locks on directories (some network
// file systems, Lustre mounted without -o flock) it returns a DirLock that
// locks nothing; Locked tells.
func LockDir(dir string, exclusive bool) (*DirLock, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("memmap: locking directory: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return &DirLock{f: f}, nil
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS),
		errors.Is(err, unix.EBADF), errors.Is(err, unix.EINVAL):
		f.Close()
		return &DirLock{}, nil
	}
	f.Close()
	return nil, fmt.Errorf("memmap: locking directory %s: flock: %w", dir, err)
}

// Locked reports whether l holds a lock (false where the file system does
// not support them).
func (l *DirLock) Locked() bool { return l != nil && l.f != nil }

// Unlock releases the lock. It is idempotent.
func (l *DirLock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Close() // closing the only descriptor releases the flock
	l.f = nil
}
