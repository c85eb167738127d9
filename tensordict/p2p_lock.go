// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/mpi"
)

// Send and Recv exchange several messages per call (a header, the metadata,
// then the payload) on tags the caller chooses. So that concurrent calls
// between the same ranks on the same tags cannot interleave their
// messages, each call holds, in every process, a lock per (communicator,
// peer, tag, direction) for the tags it uses. Holding the receive lock of
// a tag also makes it safe to probe a message and then receive it: no
// other receive of this package can take it in between. That lets the
// steady state check each message's size before receiving it (Open MPI's
// single-copy path writes past a receive buffer that is too small) without
// the allocation of a matched probe.

type p2pKey struct {
	c    *mpi.Comm
	peer int
	tag  int
	recv bool
}

// tagLock is the lock of one p2pKey. It stays in the table only while some
// call holds or waits for it (refs > 0), so the table is bounded by the
// transfers in progress, not by every tag and group ever used.
type tagLock struct {
	mu   sync.Mutex
	key  p2pKey
	refs int // guarded by p2pLocks
}

// tagLockFree bounds the free list of tagLocks kept for reuse, which
// spares the steady state of Send and Recv an allocation per call.
const tagLockFree = 64

var p2pLocks = struct {
	sync.Mutex
	m    map[p2pKey]*tagLock
	free []*tagLock
}{m: map[p2pKey]*tagLock{}}

// acquireTag takes the lock of k, entering it in the table if needed.
func acquireTag(k p2pKey) *tagLock {
	p2pLocks.Lock()
	l := enterTag(k)
	l.refs++
	p2pLocks.Unlock()
	l.mu.Lock()
	return l
}

// tryAcquireTag takes the lock of k if nobody holds it, and otherwise
// reports false without waiting.
func tryAcquireTag(k p2pKey) (*tagLock, bool) {
	p2pLocks.Lock()
	defer p2pLocks.Unlock()
	l := enterTag(k)
	if !l.mu.TryLock() {
		return nil, false // held, so refs > 0: the entry stays
	}
	l.refs++
	return l, true
}

// enterTag returns the table's lock of k, entering a new one (from the
// free list if it can) when there is none. p2pLocks must be held, and the
// caller takes a reference to a new entry.
func enterTag(k p2pKey) *tagLock {
	l, ok := p2pLocks.m[k]
	if !ok {
		if n := len(p2pLocks.free); n > 0 {
			l = p2pLocks.free[n-1]
			p2pLocks.free = p2pLocks.free[:n-1]
		} else {
			l = new(tagLock)
		}
		l.key = k
		p2pLocks.m[k] = l
	}
	return l
}

// releaseTag releases l, removing it from the table when nobody else holds
// or waits for it.
func releaseTag(l *tagLock) {
	l.mu.Unlock()
	p2pLocks.Lock()
	if l.refs--; l.refs == 0 {
		delete(p2pLocks.m, l.key)
		if len(p2pLocks.free) < tagLockFree {
			l.key = p2pKey{}
			p2pLocks.free = append(p2pLocks.free, l)
		}
	}
	p2pLocks.Unlock()
}

// tagSet returns the distinct tags of tags, sorted, in dst.
func tagSet(dst, tags []int) []int {
	dst = append(dst[:0], tags...)
	slices.Sort(dst)
	return slices.Compact(dst)
}

// lockTags takes the locks of the sorted distinct tags (in order, so that
// two calls cannot deadlock) and returns them in held.
func lockTags(held []*tagLock, c *mpi.Comm, peer int, recv bool, tags []int) []*tagLock {
	held = held[:0]
	for _, t := range tags {
		held = append(held, acquireTag(p2pKey{c: c, peer: peer, tag: t, recv: recv}))
	}
	return held
}

// lockTagsCtx is lockTags bounded by l's context: while another transfer
// holds one of the tags, it polls (tryLockTags, pollCtx) until the context
// ends, and then returns an error wrapping the context's error, holding
// nothing.
func lockTagsCtx(l *link, held []*tagLock, recv bool, tags []int) ([]*tagLock, error) {
	if l.o.ctx.Done() == nil {
		return lockTags(held, l.c, l.peer, recv, tags), nil
	}
	var ok bool
	err := pollCtx(l.o.ctx, func() (bool, error) {
		held, ok = tryLockTags(held, l.c, l.peer, recv, tags)
		return ok, nil
	})
	if err != nil {
		return held[:0], fmt.Errorf("waiting for another transfer on tags %v: %w", tags, err)
	}
	return held, nil
}

// tryLockTags is lockTags without waiting: if any lock is held elsewhere,
// it releases those it took and reports false.
func tryLockTags(held []*tagLock, c *mpi.Comm, peer int, recv bool, tags []int) ([]*tagLock, bool) {
	held = held[:0]
	for _, t := range tags {
		l, ok := tryAcquireTag(p2pKey{c: c, peer: peer, tag: t, recv: recv})
		if !ok {
			unlockAll(held)
			return held[:0], false
		}
		held = append(held, l)
	}
	return held, true
}

// unlockAll releases the locks lockTags or tryLockTags took.
func unlockAll(held []*tagLock) {
	for i := len(held) - 1; i >= 0; i-- {
		releaseTag(held[i])
	}
}
