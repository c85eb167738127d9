package tensor

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
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
//
// A Storage made by StorageOf (or FromBytes, or NewExternalStorage) over
// part of the memory of a live external Storage refers to that Storage:
// once it is released, the new Storage reports itself released too
// (Released, and ErrReleased from the tensors over it), and a transfer of
// tdmpi that uses the new Storage keeps the memory mapped until it ends
// (see Release).
type Storage struct {
	// data is the first byte of the memory, n its length. Readers load
	// data without a lock (an atomic load is a plain load on the
	// machines tdmpi runs on, where a read lock took two atomic
	// read-modify-writes per call); freeing the memory stores nil,
	// dropping the reference that keeps heap memory alive.
	data     atomic.Pointer[byte]
	n        int
	released atomic.Bool
	// seen: Bytes handed the memory out, to code that may keep it (see
	// package rawbytes); a released reusable storage not seen goes back
	// to the receive pool at once (free).
	seen atomic.Bool
	// holds counts the transfers MPI may read or write the memory for
	// (rawbytes.Hold): while it is not zero, Release leaves the memory
	// as it is, and the end of the last hold frees it.
	holds    atomic.Int32
	mu       sync.Mutex // serialises Release and free
	freed    bool       // free ran (under mu)
	release  func() error
	external bool
	reusable bool
	owner    any
	// parent is the live external storage whose memory s lies in (see
	// within.go), nil if none; recorded: s is an external storage whose
	// range is in mappings.
	parent   *Storage
	recorded bool
}

func init() {
	rawbytes.Of = func(st any) ([]byte, bool) { return st.(*Storage).view() }
	rawbytes.Hold = func(st any) bool { return st.(*Storage).hold() }
	rawbytes.Unhold = func(st any) { st.(*Storage).unhold() }
	rawbytes.InitAt = func(st any, b []byte) { st.(*Storage).init(b) }
	rawbytes.Reusable = func(b []byte) any { return reusableStorageOf(b) }
}

// newStorage returns a Storage over b.
func newStorage(b []byte) *Storage {
	s := new(Storage)
	s.init(b)
	return s
}

// init makes s, a zero Storage nothing uses yet, a Storage over b.
func (s *Storage) init(b []byte) {
	s.n = len(b)
	s.data.Store(unsafe.SliceData(b))
}

// view returns the memory of s, or false once s is released.
func (s *Storage) view() ([]byte, bool) {
	p := s.data.Load()
	if s.Released() || (p == nil && s.n > 0) {
		return nil, false
	}
	return unsafe.Slice(p, s.n), true
}

// NewStorage returns a zeroed heap Storage of n bytes, aligned to 8 bytes. It
// panics if n is negative.
func NewStorage(n int) *Storage {
	if n < 0 {
		panic(fmt.Sprintf("tensor: NewStorage: negative size %d", n))
	}
	return newStorage(alignedBytes(n))
}

// StorageOf returns a Storage that shares b. Go heap memory stays managed by
// the garbage collector; the Storage keeps it alive. If b lies in the memory
// of a live external Storage (the Bytes of an off-heap storage or a memory
// map), the new Storage is external and refers to it: it is released when
// that Storage is (see Storage).
func StorageOf(b []byte) *Storage {
	s := newStorage(b)
	if p := storageHolding(b); p != nil {
		s.parent, s.external = p, true
	}
	return s
}

// reusableStorageOf returns a Storage that shares b, heap memory from
// the receive pool (mem.Recv) that the pool takes back for reuse once
// nothing references it: package tensordict's receive and consolidated
// storages, made through rawbytes.Reusable, on memory nothing else
// wraps. TensorDict.Release releases such a storage: it then drops its
// reference at once, even while the TensorDict itself stays reachable,
// and tells the pool, which may start a collection to have the memory
// back before the next receive, or takes the memory back at once (see
// free).
func reusableStorageOf(b []byte) *Storage {
	s := newStorage(b)
	s.reusable = true
	return s
}

// NewExternalStorage returns a Storage over memory that the Go runtime does not
// manage, such as a memory mapping. owner is any value the maker wants to find
// again from the storage (package memmap keeps its file mapping there; see
// Owner). release is called once, by the first call to Release; it may be nil.
//
// The new Storage's lifetime is its own (release says when its memory
// goes), even over memory another external Storage also covers, as two
// loads of one file share a mapping: a StorageOf over b then refers to
// whichever of them was made first while it lives.
func NewExternalStorage(b []byte, owner any, release func() error) *Storage {
	s := newStorage(b)
	s.release, s.external, s.owner = release, true, owner
	s.recorded = record(s, b)
	return s
}

// Owner returns the owner value given to NewExternalStorage, or nil.
func (s *Storage) Owner() any { return s.owner }

// alignedBytes allocates n zero bytes on the Go heap, aligned to 8 bytes so
// that every dtype's elements can be viewed in place.
func alignedBytes(n int) []byte { return mem.Alloc(n) }

// Bytes returns the whole storage. It panics if the storage was released, since
// the memory may no longer be mapped.
func (s *Storage) Bytes() []byte {
	if !s.seen.Load() {
		s.seen.Store(true) // before the view: see Release
	}
	b, ok := s.view()
	if !ok {
		panic("tensor: use of released storage")
	}
	return b
}

// Len returns the size of the storage in bytes (0 once released).
func (s *Storage) Len() int {
	if s.Released() {
		return 0
	}
	return s.n
}

// External reports whether the storage's memory lies outside the Go heap.
func (s *Storage) External() bool { return s.external }

// Released reports whether Release has been called, on s or on the
// external Storage whose memory s lies in (see Storage).
func (s *Storage) Released() bool {
	return s.released.Load() || (s.parent != nil && s.parent.released.Load())
}

// Release marks the storage unusable and frees its memory if it is
// external. It is idempotent: later calls return nil and do nothing. The
// memory of a receive-pool storage (Reusable) goes back to the pool at
// once if Bytes never handed it out (see package rawbytes), else once the
// collector finds it unreachable.
//
// Memory that MPI may read or write is never freed or reused under it:
// while a transfer of tdmpi uses the storage (a Send, Recv, collective or
// InitRemote in progress, an ISend or IRecv not yet completed, an
// asynchronous collective not yet waited for, or a transfer given up at
// its context's end whose MPI operations have not completed yet), Release
// returns nil at once and the storage is unusable from then on, but its
// memory is freed (unmapped, closed, handed back) only when the last such
// transfer ends; an error of that deferred release is not reported.
// Transfers started after Release refuse the storage with an error
// wrapping ErrReleased.
func (s *Storage) Release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released.Load() {
		return nil
	}
	s.released.Store(true)
	if s.holds.Load() != 0 {
		return nil // the end of the last hold frees it (unhold)
	}
	return s.free()
}

// free frees the memory of s, released and not held, once (s.mu held).
func (s *Storage) free() error {
	if s.freed {
		return nil
	}
	s.freed = true
	d := s.data.Swap(nil)
	if s.recorded {
		forget(s, d) // before the memory may be mapped again
	}
	// A reader marks the storage seen, or holds it, before it loads
	// data, and data is nil now: a storage neither seen nor held has no
	// slice of its memory anywhere (package rawbytes).
	if s.reusable && (s.seen.Load() || !mem.GiveBack(unsafe.Slice(d, s.n))) {
		mem.Dropped(s.n) // its memory may come back to the receive pool now
	}
	if s.release != nil {
		return s.release()
	}
	return nil
}

// hold counts a transfer that MPI may read or write s's memory for, and
// reports whether s is live: it returns false, holding nothing, once s is
// released. A hold on s holds its parent too.
func (s *Storage) hold() bool {
	if s.parent != nil && !s.parent.hold() {
		return false
	}
	s.holds.Add(1)
	if s.released.Load() {
		s.unhold()
		return false
	}
	return true
}

// unhold ends a hold, and frees s's memory when it was the last one and
// s was released meanwhile; then it ends the hold of s's parent.
func (s *Storage) unhold() {
	if s.holds.Add(-1) == 0 && s.released.Load() {
		s.mu.Lock()
		if s.holds.Load() == 0 {
			_ = s.free() // Release has returned: nobody to tell
		}
		s.mu.Unlock()
	}
	if s.parent != nil {
		s.parent.unhold()
	}
}

// liveBytes returns the whole storage, or an error naming op if s was
// released.
func (s *Storage) liveBytes(op string) ([]byte, error) {
	b, ok := s.view()
	if !ok {
		return nil, fmt.Errorf("tensor: %s: %w (closed memory map?)", op, ErrReleased)
	}
	return b, nil
}

// checkLive returns an error if s was released.
func (s *Storage) checkLive(op string) error {
	_, err := s.liveBytes(op)
	return err
}
