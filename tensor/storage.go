package tensor

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// Storage is a flat, 8-byte aligned run of bytes that one or more tensors view.
// Views made by Expand, Reshape, indexing or slicing share their Storage with
// the tensor they come from.
//
// # Ownership
//
// A Storage made by NewStorage lives on the Go heap and is freed by the garbage
// collector. A Storage made by NewExternalStorage wraps memory the Go runtime
// does not manage (a memory-mapped file, an off-heap buffer): its owner frees it
// with Release, exactly once; slices obtained from it (Bytes, Data, Dense) must
// not be used after that. Release on a heap Storage only marks it released.
type Storage struct {
	mu       sync.RWMutex
	buf      []byte
	release  func() error
	released bool
	external bool
	reusable bool
	owner    any
}

// NewStorage returns a zeroed heap Storage of n bytes, aligned to 8 bytes. It
// panics if n is negative.
func NewStorage(n int) *Storage {
	if n < 0 {
		panic(fmt.Sprintf("tensor: NewStorage: negative size %d", n))
	}
	return &Storage{buf: alignedBytes(n)}
}

// StorageOf returns a Storage that shares b. b's memory stays managed by the Go
// garbage collector; the Storage keeps it alive.
func StorageOf(b []byte) *Storage { return &Storage{buf: b} }

// ReusableStorageOf returns a Storage that shares b, heap memory that a
// pool takes back for reuse once nothing references it (package
// tensordict's receive storage). It is StorageOf marked Reusable, so that
// TensorDict.Release releases it: the storage then drops its reference at
// once, even while the TensorDict itself stays reachable.
func ReusableStorageOf(b []byte) *Storage { return &Storage{buf: b, reusable: true} }

// Reusable reports whether s was made by ReusableStorageOf.
func (s *Storage) Reusable() bool { return s.reusable }

// NewExternalStorage returns a Storage over memory that the Go runtime does not
// manage, such as a memory mapping. owner is any value the maker wants to find
// again from the storage (package memmap keeps its file mapping there; see
// Owner). release is called once, by the first call to Release; it may be nil.
func NewExternalStorage(b []byte, owner any, release func() error) *Storage {
	return &Storage{buf: b, release: release, external: true, owner: owner}
}

// Owner returns the owner value given to NewExternalStorage, or nil.
func (s *Storage) Owner() any { return s.owner }

// alignedBytes allocates n zero bytes on the Go heap, aligned to 8 bytes so
// that every dtype's elements can be viewed in place.
func alignedBytes(n int) []byte { return mem.Alloc(n) }

// Bytes returns the whole storage. It panics if the storage was released, since
// the memory may no longer be mapped.
func (s *Storage) Bytes() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.released {
		panic("tensor: use of released storage")
	}
	return s.buf
}

// Len returns the size of the storage in bytes (0 once released).
func (s *Storage) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.released {
		return 0
	}
	return len(s.buf)
}

// External reports whether the storage's memory lies outside the Go heap.
func (s *Storage) External() bool { return s.external }

// Released reports whether Release has been called.
func (s *Storage) Released() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.released
}

// Release frees the storage's memory if it is external and marks the storage
// unusable. It is idempotent: later calls return nil and do nothing.
func (s *Storage) Release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.released = true
	s.buf = nil
	if s.release != nil {
		return s.release()
	}
	return nil
}

// ErrReleased is wrapped by every error about a tensor or storage whose
// Storage was released (a closed memory map, a freed off-heap buffer), so
// callers can test for it with errors.Is.
var ErrReleased = errors.New("storage was released")

// liveBytes returns the whole storage, or an error naming op if s was
// released, under one read lock.
func (s *Storage) liveBytes(op string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.released {
		return nil, fmt.Errorf("tensor: %s: %w (closed memory map?)", op, ErrReleased)
	}
	return s.buf, nil
}

// checkLive returns an error if s was released.
func (s *Storage) checkLive(op string) error {
	_, err := s.liveBytes(op)
	return err
}
