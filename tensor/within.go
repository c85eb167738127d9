package tensor

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// A Storage made over bytes that lie in the memory of a live external
// storage (StorageOf or NewExternalStorage over part of the Bytes of an
// off-heap storage or a memory map; ConsolidateInto over them) refers to
// that storage, its parent: it is unusable once the parent is released
// (its accessors report ErrReleased instead of touching memory that may
// be unmapped), and a transfer that holds it holds the parent, so that
// the parent's memory stays in place while MPI uses it.
//
// To find the parent, every external storage records the range of its
// memory in mappings while it is live, from NewExternalStorage until its
// memory is freed (unmapped). The ranges do not overlap: a storage over
// memory that overlaps another's range is not recorded. Entries refer to
// their storages weakly, so that recording a storage does not keep it
// alive: an entry whose storage was collected is ignored, and dropped on
// the next change.

// mapping is the memory [lo, hi) of a live external storage st.
type mapping struct {
	lo, hi uintptr
	st     weak.Pointer[Storage]
}

// mappings are the memory ranges of the live external storages, sorted by
// lo; n is len(list), for lookups to skip the lock when there is none.
var mappings struct {
	sync.RWMutex
	list []mapping
	n    atomic.Int64
}

// bounds returns the address range of b.
func bounds(b []byte) (lo, hi uintptr) {
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lo, lo + uintptr(len(b))
}

// storageHolding returns the live external storage whose memory holds all
// of b (nil: none, or b is empty). It takes O(log n) for n live external
// storages.
func storageHolding(b []byte) *Storage {
	if len(b) == 0 || mappings.n.Load() == 0 {
		return nil
	}
	lo, hi := bounds(b)
	mappings.RLock()
	defer mappings.RUnlock()
	l := mappings.list
	// The last range starting at or before lo.
	i, found := slices.BinarySearchFunc(l, lo, byLo)
	if !found {
		i--
	}
	if i < 0 || hi > l[i].hi {
		return nil
	}
	return l[i].st.Value()
}

// byLo compares m's range with an address, by where it starts.
func byLo(m mapping, lo uintptr) int { return cmp.Compare(m.lo, lo) }

// record records the memory b of s, a new external storage, and reports
// whether it did: not if b is empty or overlaps the range of another
// live external storage.
func record(s *Storage, b []byte) bool {
	if len(b) == 0 {
		return false
	}
	lo, hi := bounds(b)
	mappings.Lock()
	defer mappings.Unlock()
	l := slices.DeleteFunc(mappings.list, func(m mapping) bool { return m.st.Value() == nil })
	i, _ := slices.BinarySearchFunc(l, lo, byLo)
	if (i > 0 && l[i-1].hi > lo) || (i < len(l) && l[i].lo < hi) {
		mappings.list = l
		mappings.n.Store(int64(len(l)))
		return false
	}
	mappings.list = slices.Insert(l, i, mapping{lo: lo, hi: hi, st: weak.Make(s)})
	mappings.n.Store(int64(len(mappings.list)))
	return true
}

// forget removes the range of s, a recorded external storage whose memory
// starts at p, before its memory is freed.
func forget(s *Storage, p *byte) {
	lo := uintptr(unsafe.Pointer(p))
	mappings.Lock()
	defer mappings.Unlock()
	l := mappings.list
	if i, ok := slices.BinarySearchFunc(l, lo, byLo); ok && l[i].st.Value() == s {
		mappings.list = slices.Delete(l, i, i+1)
		mappings.n.Store(int64(len(mappings.list)))
	}
}
