// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Transfers on overlapping tag sets exclude each other on every shared
// tag, whether they wait (lock) or poll (tryLock), and never deadlock;
// afterwards nothing is locked, and the locks the Helds keep referenced
// stay in the table until released, then are swept like any idle lock.
func TestTagLocksExclude(t *testing.T) {
	tb := newTagTable()
	sets := [][]int{{1, 2, 3}, {2, 3, 4}, {3}, {1, 4, 5, 6}, {0, 6}}
	inside := make([]int, 7) // transfers holding each tag, guarded by the tags' locks
	helds := make([]*Held, 8)
	var wg sync.WaitGroup
	for g := range helds {
		h := new(Held)
		helds[g] = h
		wg.Go(func() {
			for i := range 300 {
				tags := sets[(g+i)%len(sets)]
				if g%2 == 0 {
					h.lock(tb, 1, true, tags)
				} else if !h.tryLock(tb, 1, true, tags) {
					assert.False(t, h.locked, "a failed try holds nothing")
					continue
				}
				for _, tag := range tags {
					inside[tag]++
					assert.Equal(t, 1, inside[tag], "tag %d held twice", tag)
				}
				for _, tag := range tags {
					inside[tag]--
				}
				h.Unlock()
			}
		})
	}
	wg.Wait()
	held, kept, idle := tb.inUse()
	assert.Zero(t, held)
	assert.Equal(t, 7, kept, "one lock per tag, kept for the next transfers")
	assert.Zero(t, idle)
	for _, h := range helds {
		h.Release()
	}
	tb.mu.Lock()
	tb.sweep()
	tb.mu.Unlock()
	assert.Empty(t, tb.m, "released, the locks are idle and swept")
}

// A table sweeps its unreferenced locks out once it has 2*tagLockIdle,
// never one that a Held references (locked or kept), and the send and
// receive locks of a tag, and the locks of two peers, are distinct.
func TestTagLocksBounded(t *testing.T) {
	tb := newTagTable()
	tags := make([]int, 2*tagLockIdle+100)
	for i := range tags {
		tags[i] = i
	}
	var many Held
	many.lock(tb, 0, false, tags)
	h, kept, idle := tb.inUse()
	require.Equal(t, len(tags), h, "locked locks are not swept")
	require.Zero(t, kept+idle)
	many.Unlock()
	h, kept, idle = tb.inUse()
	assert.Zero(t, h)
	assert.Equal(t, len(tags), kept)
	assert.Zero(t, idle)
	var one Held
	one.lock(tb, 0, false, []int{len(tags)}) // a new lock: the table sweeps, but all are referenced
	assert.Len(t, tb.m, len(tags)+1, "kept locks are not swept")
	one.Unlock()
	many.Release()
	var other Held
	other.lock(tb, 0, false, []int{len(tags) + 1}) // sweeps the released ones
	h, kept, idle = tb.inUse()
	assert.Equal(t, 1, h)
	assert.Equal(t, 1, kept, "the one lock still referenced")
	assert.Zero(t, idle, "the released ones swept")
	other.Unlock()

	var a, b, c, d Held
	a.lock(tb, 0, false, []int{7})
	require.True(t, b.tryLock(tb, 0, true, []int{7}), "the receive lock of a tag is not its send lock")
	require.True(t, c.tryLock(tb, 1, false, []int{7}), "another peer's lock")
	require.False(t, d.tryLock(tb, 0, false, []int{6, 7}))
	require.False(t, d.locked)
	assert.True(t, d.tryLock(tb, 0, false, []int{6}), "a failed try left nothing locked")
	for _, x := range []*Held{&a, &b, &c, &d} {
		x.Unlock()
	}
	h, _, _ = tb.inUse()
	assert.Zero(t, h)
}

// The steady state takes the locks its Held keeps, without the table;
// other tags drop them and take the table's; a released lock that the
// table swept is never taken again, so that a tag never has two locks.
func TestTagLocksReuse(t *testing.T) {
	tb := newTagTable()
	var h Held
	h.lock(tb, 3, true, []int{1, 2})
	first := slices.Clone(h.locks)
	h.Unlock()
	assert.Equal(t, int32(1), first[0].refs.Load(), "kept between transfers")
	h.lock(tb, 3, true, []int{1, 2})
	assert.Equal(t, first, h.locks, "the same locks")
	assert.Equal(t, int32(1), first[0].refs.Load(), "one reference")
	h.Unlock()

	h.lock(tb, 3, true, []int{2, 5}) // other tags: from the table
	assert.Same(t, first[1], h.locks[0])
	assert.Equal(t, int32(0), first[0].refs.Load(), "tag 1's reference dropped")
	h.Unlock()

	var k Held
	k.lock(tb, 4, true, []int{2}) // another peer: another lock
	assert.NotSame(t, first[1], k.locks[0])
	k.Unlock()

	h.Release()
	k.Release()
	tb.mu.Lock()
	tb.sweep()
	tb.mu.Unlock()
	assert.Empty(t, tb.m)
	h.lock(tb, 3, true, []int{2, 5})
	assert.NotSame(t, first[1], h.locks[0], "a swept lock is not reused")
	assert.Same(t, h.locks[0], tb.m[tagKey{peer: 3, tag: 2, recv: true}])
	var other Held
	assert.False(t, other.tryLock(tb, 3, true, []int{2}), "the table's lock is the one held")
	h.Unlock()
	held, kept, idle := tb.inUse()
	assert.Zero(t, held)
	assert.Equal(t, 2, kept, "h's two locks (other references one of them too)")
	assert.Zero(t, idle)
	other.Release()
	assert.Equal(t, int32(1), h.locks[0].refs.Load(), "h's reference stays")
	assert.Panics(t, func() { h.locked = true; h.Release() }, "releasing a locked Held is a bug")
}
