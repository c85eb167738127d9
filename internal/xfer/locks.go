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
// table only while some call holds or waits for it (refs > 0), so a table
// is bounded by the transfers in progress, not by every tag ever used.
type TagLock struct {
	mu   sync.Mutex
	t    *tagTable
	key  tagKey
	refs int // guarded by t.mu
}

// tagLockFree bounds the free list of TagLocks a table keeps for reuse,
// which spares the steady state of Send and Recv an allocation per call.
const tagLockFree = 64

// tagTable holds the TagLocks of one group.
type tagTable struct {
	mu   sync.Mutex
	m    map[tagKey]*TagLock
	free []*TagLock
}

var tagLocks = group.Slot[tagTable]{New: func() *tagTable { return &tagTable{m: map[tagKey]*TagLock{}} }}

// acquire takes the lock of k, entering it in the table if needed.
func (t *tagTable) acquire(k tagKey) *TagLock {
	t.mu.Lock()
	l := t.enter(k)
	l.refs++
	t.mu.Unlock()
	l.mu.Lock()
	return l
}

// tryAcquire takes the lock of k if nobody holds it, and otherwise reports
// false without waiting.
func (t *tagTable) tryAcquire(k tagKey) (*TagLock, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.enter(k)
	if !l.mu.TryLock() {
		return nil, false // held, so refs > 0: the entry stays
	}
	l.refs++
	return l, true
}

// enter returns the table's lock of k, entering a new one (from the free
// list if it can) when there is none. t.mu must be held, and the caller
// takes a reference to a new entry.
func (t *tagTable) enter(k tagKey) *TagLock {
	l, ok := t.m[k]
	if !ok {
		if n := len(t.free); n > 0 {
			l = t.free[n-1]
			t.free = t.free[:n-1]
		} else {
			l = &TagLock{t: t}
		}
		l.key = k
		t.m[k] = l
	}
	return l
}

// release releases l, removing it from its table when nobody else holds
// or waits for it.
func (l *TagLock) release() {
	l.mu.Unlock()
	t := l.t
	t.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(t.m, l.key)
		if len(t.free) < tagLockFree {
			l.key = tagKey{}
			t.free = append(t.free, l)
		}
	}
	t.mu.Unlock()
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
	held = held[:0]
	t := tagLocks.Of(g)
	for _, tag := range tags {
		held = append(held, t.acquire(tagKey{peer: peer, tag: tag, recv: recv}))
	}
	return held
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
// it releases those it took and reports false.
func TryLockTags(held []*TagLock, g *group.Group, peer int, recv bool, tags []int) ([]*TagLock, bool) {
	held = held[:0]
	t := tagLocks.Of(g)
	for _, tag := range tags {
		l, ok := t.tryAcquire(tagKey{peer: peer, tag: tag, recv: recv})
		if !ok {
			UnlockAll(held)
			return held[:0], false
		}
		held = append(held, l)
	}
	return held, true
}

// UnlockAll releases the locks LockTags or TryLockTags took.
func UnlockAll(held []*TagLock) {
	for i := len(held) - 1; i >= 0; i-- {
		held[i].release()
	}
}

// TagLocksInUse returns how many tag locks of g are held or waited for,
// and how many its table keeps for reuse (at most 64): after every
// transfer on g has ended, held is zero. Tests check it.
func TagLocksInUse(g *group.Group) (held, free int) {
	t := tagLocks.Of(g)
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m), len(t.free)
}
