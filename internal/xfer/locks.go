// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/group"
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
// (group.Slot): they go away with it.

// tagKey names one lock of a group.
type tagKey struct {
	peer int
	tag  int
	recv bool
}

// TagLock is the lock of one tag of one group. It stays in its group's
// table while some call holds or waits for it (refs > 0), and after that
// until the table has 2*tagLockIdle locks and sweeps the idle ones out: the
// steady state of Send and Recv, which takes the same tags call after call,
// finds its locks again, and a table is bounded by the transfers in
// progress plus 2*tagLockIdle, not by every tag ever used.
//
// A call finds its locks through the table (its mutex and map), or, in
// the steady state, as the locks its previous call held (LockTags' held
// slice keeps them): it then takes a reference with one atomic operation,
// unless a sweep removed the lock meanwhile (refs -1), and never touches
// the table.
type TagLock struct {
	mu   sync.Mutex
	t    *tagTable
	key  tagKey
	refs atomic.Int32 // calls holding or waiting for mu; -1 once swept out of t
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

var tagLocks = group.Slot[tagTable]{New: newTagTable}

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
	l := &TagLock{t: t, key: k}
	l.refs.Store(1)
	t.m[k] = l
	return l
}

// sweep removes the locks nobody holds or waits for. t.mu must be held.
func (t *tagTable) sweep() {
	for k, l := range t.m {
		if l.refs.CompareAndSwap(0, -1) {
			delete(t.m, k)
		}
	}
}

// refAll appends to held a reference to the lock of each of tags, in
// order: the lock at the same place of held's spare capacity (the
// previous call's) when it is that tag's and still in the table, else
// the table's.
func (t *tagTable) refAll(held []*TagLock, peer int, recv bool, tags []int) []*TagLock {
	n := len(held)
	prev := held[n:cap(held)]
	locked := false
	for i, tag := range tags {
		k := tagKey{peer: peer, tag: tag, recv: recv}
		if i < len(prev) {
			if l := prev[i]; l != nil && l.t == t && l.key == k && l.tryRef() {
				held = append(held, l)
				continue
			}
		}
		if !locked {
			t.mu.Lock()
			locked = true
		}
		held = append(held, t.ref(k))
	}
	if locked {
		t.mu.Unlock()
	}
	return held
}

// lockAll takes the locks of tags, in their order, appending them to held.
func (t *tagTable) lockAll(held []*TagLock, peer int, recv bool, tags []int) []*TagLock {
	n := len(held)
	held = t.refAll(held, peer, recv, tags)
	for _, l := range held[n:] {
		l.mu.Lock()
	}
	return held
}

// tryLockAll is lockAll without waiting: if any lock is held elsewhere, it
// takes none and reports false.
func (t *tagTable) tryLockAll(held []*TagLock, peer int, recv bool, tags []int) ([]*TagLock, bool) {
	n := len(held)
	held = t.refAll(held, peer, recv, tags)
	for i, l := range held[n:] {
		if !l.mu.TryLock() {
			for _, h := range held[n : n+i] {
				h.mu.Unlock()
			}
			for _, h := range held[n:] {
				h.refs.Add(-1)
			}
			return held[:n], false
		}
	}
	return held, true
}

// TagSet returns the distinct tags of tags, sorted, in dst.
func TagSet(dst, tags []int) []int {
	dst = append(dst[:0], tags...)
	slices.Sort(dst)
	return slices.Compact(dst)
}

// LockTags takes the locks of the sorted distinct tags (in order, so that
// two calls cannot deadlock) and returns them in held. Pass the held of
// the caller's previous call, released: when it was on the same tags, its
// locks are taken again without a lookup. (Keep one held per direction.)
func LockTags(held []*TagLock, g *group.Group, peer int, recv bool, tags []int) []*TagLock {
	return tagLocks.Of(g).lockAll(held[:0], peer, recv, tags)
}

// LockTagsCtx is LockTags bounded by l's context: while another transfer
// holds one of the tags, it polls (TryLockTags, Poll) until the context
// ends, and then returns an error wrapping the context's error, holding
// nothing.
func LockTagsCtx(l *Link, held []*TagLock, recv bool, tags []int) ([]*TagLock, error) {
	if l.Ctx.Done() == nil {
		return LockTags(held, l.Group, l.Peer, recv, tags), nil
	}
	var ok bool
	err := Poll(l.Ctx, func() (bool, error) {
		held, ok = TryLockTags(held, l.Group, l.Peer, recv, tags)
		return ok, nil
	})
	if err != nil {
		return held[:0], fmt.Errorf("waiting for another transfer on tags %v: %w", tags, err)
	}
	return held, nil
}

// TryLockTags is LockTags without waiting: if any lock is held elsewhere,
// it takes none and reports false.
func TryLockTags(held []*TagLock, g *group.Group, peer int, recv bool, tags []int) ([]*TagLock, bool) {
	return tagLocks.Of(g).tryLockAll(held[:0], peer, recv, tags)
}

// UnlockAll releases the locks LockTags or TryLockTags took. held keeps
// them, for the next call with the same tags to find.
func UnlockAll(held []*TagLock) {
	for i := len(held) - 1; i >= 0; i-- {
		held[i].mu.Unlock()
		held[i].refs.Add(-1)
	}
}

// TagLocksInUse returns how many tag locks of g are held or waited for,
// and how many idle ones its table keeps for reuse (fewer than 2048):
// after every transfer on g has ended, held is zero. Tests check it.
func TagLocksInUse(g *group.Group) (held, idle int) {
	return tagLocks.Of(g).inUse()
}

func (t *tagTable) inUse() (held, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.m {
		if l.refs.Load() > 0 {
			held++
		} else {
			idle++
		}
	}
	return held, idle
}
