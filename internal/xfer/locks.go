// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"fmt"
	"slices"
	"sync"

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
// while the table keeps fewer than tagLockIdle idle locks: the steady
// state of Send and Recv, which takes the same tags call after call, finds
// its locks there, and a table is bounded by the transfers in progress
// plus tagLockIdle, not by every tag ever used.
type TagLock struct {
	mu   sync.Mutex
	t    *tagTable
	key  tagKey
	refs int // guarded by t.mu
}

// tagLockIdle bounds the locks nobody holds that a table keeps.
const tagLockIdle = 1024

// tagTable holds the TagLocks of one group.
type tagTable struct {
	mu   sync.Mutex
	m    map[tagKey]*TagLock
	idle int // locks of m with refs == 0
}

var tagLocks = group.Slot[tagTable]{New: newTagTable}

func newTagTable() *tagTable { return &tagTable{m: map[tagKey]*TagLock{}} }

// ref returns the table's lock of k with a reference taken, entering a
// new one if there is none. t.mu must be held.
func (t *tagTable) ref(k tagKey) *TagLock {
	l, ok := t.m[k]
	switch {
	case !ok:
		l = &TagLock{t: t, key: k}
		t.m[k] = l
	case l.refs == 0:
		t.idle--
	}
	l.refs++
	return l
}

// unref drops a reference to l, which stays in the table, idle, if the
// table keeps fewer than tagLockIdle idle locks. t.mu must be held.
func (t *tagTable) unref(l *TagLock) {
	if l.refs--; l.refs > 0 {
		return
	}
	if t.idle < tagLockIdle {
		t.idle++
		return
	}
	delete(t.m, l.key)
}

// lockAll takes the locks of tags, in their order, appending them to held.
func (t *tagTable) lockAll(held []*TagLock, peer int, recv bool, tags []int) []*TagLock {
	n := len(held)
	t.mu.Lock()
	for _, tag := range tags {
		held = append(held, t.ref(tagKey{peer: peer, tag: tag, recv: recv}))
	}
	t.mu.Unlock()
	for _, l := range held[n:] {
		l.mu.Lock()
	}
	return held
}

// tryLockAll is lockAll without waiting: if any lock is held elsewhere, it
// takes none and reports false.
func (t *tagTable) tryLockAll(held []*TagLock, peer int, recv bool, tags []int) ([]*TagLock, bool) {
	n := len(held)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tag := range tags {
		l := t.ref(tagKey{peer: peer, tag: tag, recv: recv})
		if !l.mu.TryLock() {
			t.unref(l)
			for _, h := range held[n:] {
				h.mu.Unlock()
				t.unref(h)
			}
			return held[:n], false
		}
		held = append(held, l)
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
// two calls cannot deadlock) and returns them in held.
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

// UnlockAll releases the locks LockTags or TryLockTags took.
func UnlockAll(held []*TagLock) {
	for i := len(held) - 1; i >= 0; i-- {
		held[i].mu.Unlock()
	}
	var t *tagTable
	for _, l := range held {
		if l.t != t {
			if t != nil {
				t.mu.Unlock()
			}
			t = l.t
			t.mu.Lock()
		}
		t.unref(l)
	}
	if t != nil {
		t.mu.Unlock()
	}
}

// TagLocksInUse returns how many tag locks of g are held or waited for,
// and how many idle ones its table keeps for reuse (at most 1024): after
// every transfer on g has ended, held is zero. Tests check it.
func TagLocksInUse(g *group.Group) (held, idle int) {
	return tagLocks.Of(g).inUse()
}

func (t *tagTable) inUse() (held, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m) - t.idle, t.idle
}
