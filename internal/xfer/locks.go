// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// Send and Recv exchange several messages per call (a header, the metadata,
// then the payload) on tags the caller chooses. So that concurrent calls
// between the same ranks on the same tags cannot interleave their
// messages, each call holds, in every process, a lock per (group, peer,
// tag, direction) for the tags it uses. Holding the receive lock of a tag
// also makes it safe to Probe a message and then receive it: no other
// receive of this package can take it in between. That lets the steady
// state check each message's size before receiving it (Open MPI's
// single-copy path writes past a receive buffer that is too small) without
// the allocation of a matched probe. The locks of a group are its state
// (proto.Slot): they go away with it.

// tagKey names one lock of a group.
type tagKey struct {
	peer int
	tag  int
	recv bool
}

// TagLock is the lock of one tag of one group. It stays in its group's
// table while some owner references it (refs > 0: a Held that holds it,
// waits for it or keeps it for its next transfer), and after that until
// the table has 2*tagLockIdle locks and sweeps the idle ones out. A table
// is bounded by the locks its owners reference plus 2*tagLockIdle, not by
// every tag ever used.
type TagLock struct {
	mu   sync.Mutex
	key  tagKey
	refs atomic.Int32 // Helds referencing the lock; -1 once swept out of its table
}

// tryRef takes a reference to l unless l was swept out of its table.
func (l *TagLock) tryRef() bool {
	for {
		r := l.refs.Load()
		if r < 0 {
			return false
		}
		if l.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// tagLockIdle is half the number of locks at which a table sweeps out the
// idle ones.
const tagLockIdle = 1024

// tagTable holds the TagLocks of one group.
type tagTable struct {
	mu sync.Mutex
	m  map[tagKey]*TagLock // never holds a swept lock
}

var tagLocks = proto.Slot[tagTable]{New: newTagTable}

func newTagTable() *tagTable { return &tagTable{m: map[tagKey]*TagLock{}} }

// ref returns the table's lock of k with a reference taken, entering a
// new one if there is none. t.mu must be held.
func (t *tagTable) ref(k tagKey) *TagLock {
	if l, ok := t.m[k]; ok && l.tryRef() {
		return l // a lock in m is never swept: tryRef succeeds
	}
	if len(t.m) >= 2*tagLockIdle {
		t.sweep()
	}
	l := &TagLock{key: k}
	l.refs.Store(1)
	t.m[k] = l
	return l
}

// sweep removes the locks nobody references. t.mu must be held.
func (t *tagTable) sweep() {
	for k, l := range t.m {
		if l.refs.CompareAndSwap(0, -1) {
			delete(t.m, k)
		}
	}
}

// Held is the tag locks of one direction of one owner's transfers (a
// TensorDict's sends, or its receives): Lock takes the locks of a
// transfer's tags, Unlock gives them back. Between transfers it keeps
// them referenced, so that the next transfer on the same tags of the same
// group and peer takes their mutexes alone, without the table (the steady
// state: 2 atomic operations a transfer instead of 4 and a lookup); a
// transfer on other tags drops the references and takes new ones.
//
// The owner serializes its transfers (a Held is not safe for concurrent
// use) and calls Release when it goes away: runtime.AddCleanup on the
// owner, with the Held (which must not reach the owner) as the argument.
// A Held that is never released keeps its locks in the table, but no
// transfer waits for them.
type Held struct {
	locks  []*TagLock // referenced, in the order of the tags
	g      *group.Group
	t      *tagTable // g's, where locks are
	locked bool
}

// Lock takes the locks of tags (sorted and distinct, so that two
// transfers cannot deadlock) for a transfer with peer on g, waiting for
// the transfers that hold them. A receive from mpi.AnySource takes the
// locks of its tags for every rank of g: its first message may come from
// any of them, and it must not match the header of a transfer whose
// other messages a receive from that rank is taking, or take those
// messages itself.
func (h *Held) Lock(g *group.Group, peer int, recv bool, tags []int) {
	h.lock(h.table(g), peer, recv, tags)
}

// TryLock is Lock without waiting: if another transfer holds one of the
// locks, it takes none and reports false.
func (h *Held) TryLock(g *group.Group, peer int, recv bool, tags []int) bool {
	return h.tryLock(h.table(g), peer, recv, tags)
}

// LockCtx is Lock for l's transfer bounded by its context: while another
// transfer holds one of the locks, it polls (TryLock, Poll) until the
// context ends, and then returns an error wrapping the context's error,
// holding nothing.
func (h *Held) LockCtx(l *Link, recv bool, tags []int) error {
	if l.Ctx.Done() == nil {
		h.Lock(l.Group, l.Peer, recv, tags)
		return nil
	}
	err := Poll(l.Ctx, func() (bool, error) {
		return h.TryLock(l.Group, l.Peer, recv, tags), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for another transfer on tags %v: %w", tags, err)
	}
	return nil
}

// Unlock gives back the locks Lock or TryLock took, keeping them
// referenced for the next transfer.
func (h *Held) Unlock() {
	for i := len(h.locks) - 1; i >= 0; i-- {
		h.locks[i].mu.Unlock()
	}
	h.locked = false
}

// Release drops h's references, for the table to sweep the locks once no
// other Held references them. h must not be locked.
func (h *Held) Release() {
	if h.locked {
		panic("xfer: Release of a locked Held")
	}
	h.drop()
	h.g, h.t = nil, nil
}

// drop drops h's references to its locks.
func (h *Held) drop() {
	for _, l := range h.locks {
		l.refs.Add(-1)
	}
	clear(h.locks)
	h.locks = h.locks[:0]
}

// table returns g's table of locks: the one h's locks are in when they
// are g's (no lookup), else the group's.
func (h *Held) table(g *group.Group) *tagTable {
	if h.g == g && h.t != nil {
		return h.t
	}
	h.drop()
	h.g, h.t = g, tagLocks.Of(g)
	return h.t
}

// lock is Lock on table t.
func (h *Held) lock(t *tagTable, peer int, recv bool, tags []int) {
	h.refer(t, peer, recv, tags)
	for _, l := range h.locks {
		l.mu.Lock()
	}
	h.locked = true
}

// tryLock is TryLock on table t.
func (h *Held) tryLock(t *tagTable, peer int, recv bool, tags []int) bool {
	h.refer(t, peer, recv, tags)
	for i, l := range h.locks {
		if !l.mu.TryLock() {
			for _, taken := range h.locks[:i] {
				taken.mu.Unlock()
			}
			return false
		}
	}
	h.locked = true
	return true
}

// refer makes h.locks the locks of tags for peer in t, referenced: the
// ones it references already when they are those (no lookup), else the
// table's. For peer mpi.AnySource they are the locks of tags for every
// rank of h's group (see Lock).
func (h *Held) refer(t *tagTable, peer int, recv bool, tags []int) {
	first, last := lockPeers(h.g, peer)
	if h.t == t && len(h.locks) == (last-first+1)*len(tags) {
		same, i := true, 0
		for p := first; p <= last && same; p++ {
			for _, tag := range tags {
				if h.locks[i].key != (tagKey{peer: p, tag: tag, recv: recv}) {
					same = false
					break
				}
				i++
			}
		}
		if same {
			return
		}
	}
	h.drop()
	h.t = t
	t.mu.Lock()
	for p := first; p <= last; p++ {
		for _, tag := range tags {
			h.locks = append(h.locks, t.ref(tagKey{peer: p, tag: tag, recv: recv}))
		}
	}
	t.mu.Unlock()
}

// lockPeers returns the ranks of g whose locks a transfer with peer
// takes: peer alone, or every rank for mpi.AnySource. Taken in the order
// of (rank, tag), the locks of any two transfers cannot deadlock.
func lockPeers(g *group.Group, peer int) (first, last int) {
	if peer == mpi.AnySource {
		return 0, g.Size() - 1
	}
	return peer, peer
}

// TagSet returns the distinct tags of tags, sorted, in dst.
func TagSet(dst, tags []int) []int {
	dst = append(dst[:0], tags...)
	slices.Sort(dst)
	return slices.Compact(dst)
}

// TagLocksInUse returns how many tag locks of g's table are locked (held
// by a transfer), kept (referenced by a Held for its next transfer) and
// idle (which the table keeps for reuse, fewer than 2048): after every
// transfer on g has ended, held is zero, and kept is zero once the owners
// of the Helds are gone. Tests check it.
func TagLocksInUse(g *group.Group) (held, kept, idle int) {
	return tagLocks.Of(g).inUse()
}

func (t *tagTable) inUse() (held, kept, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.m {
		switch {
		case !l.mu.TryLock():
			held++
			continue
		case l.refs.Load() > 0:
			kept++
		default:
			idle++
		}
		l.mu.Unlock()
	}
	return held, kept, idle
}
