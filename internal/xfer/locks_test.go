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

// Calls on overlapping tag sets exclude each other on every shared tag,
// whether they wait (lockAll) or poll (tryLockAll), and never deadlock;
// afterwards nothing is held and the idle locks are bounded.
func TestTagLocksExclude(t *testing.T) {
	tb := newTagTable()
	sets := [][]int{{1, 2, 3}, {2, 3, 4}, {3}, {1, 4, 5, 6}, {0, 6}}
	inside := make([]int, 7) // calls holding each tag, guarded by the tags' locks
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var held []*TagLock
			for i := range 300 {
				tags := sets[(g+i)%len(sets)]
				if g%2 == 0 {
					held = tb.lockAll(held[:0], 1, true, tags)
				} else {
					var ok bool
					if held, ok = tb.tryLockAll(held[:0], 1, true, tags); !ok {
						assert.Empty(t, held, "a failed try holds nothing")
						continue
					}
				}
				for _, tag := range tags {
					inside[tag]++
					assert.Equal(t, 1, inside[tag], "tag %d held twice", tag)
				}
				for _, tag := range tags {
					inside[tag]--
				}
				UnlockAll(held)
			}
		})
	}
	wg.Wait()
	held, idle := tb.inUse()
	assert.Zero(t, held)
	assert.Equal(t, 7, idle, "the idle locks stay for the next calls")
}

// A table sweeps its idle locks out once it has 2*tagLockIdle, never one
// that is held, and the send and receive locks of a tag, and the locks of
// two peers, are distinct.
func TestTagLocksBounded(t *testing.T) {
	tb := newTagTable()
	tags := make([]int, 2*tagLockIdle+100)
	for i := range tags {
		tags[i] = i
	}
	held := tb.lockAll(nil, 0, false, tags)
	h, idle := tb.inUse()
	require.Equal(t, len(tags), h, "held locks are not swept")
	require.Zero(t, idle)
	UnlockAll(held)
	h, idle = tb.inUse()
	assert.Zero(t, h)
	assert.Equal(t, len(tags), idle)
	one := tb.lockAll(nil, 0, false, []int{len(tags)}) // a new lock: the table sweeps
	h, idle = tb.inUse()
	assert.Equal(t, 1, h)
	assert.Zero(t, idle)
	UnlockAll(one)

	a := tb.lockAll(nil, 0, false, []int{7})
	b, ok := tb.tryLockAll(nil, 0, true, []int{7})
	require.True(t, ok, "the receive lock of a tag is not its send lock")
	c, ok := tb.tryLockAll(nil, 1, false, []int{7})
	require.True(t, ok, "another peer's lock")
	_, ok = tb.tryLockAll(nil, 0, false, []int{6, 7})
	require.False(t, ok)
	UnlockAll(a)
	UnlockAll(b)
	UnlockAll(c)
	h, _ = tb.inUse()
	assert.Zero(t, h)
}

// The steady state takes the locks its previous call held, without the
// table; a lock swept out of the table meanwhile is not taken again, so
// that a tag never has two locks.
func TestTagLocksReuse(t *testing.T) {
	tb := newTagTable()
	held := tb.lockAll(nil, 3, true, []int{1, 2})
	first := slices.Clone(held)
	UnlockAll(held)
	held = tb.lockAll(held[:0], 3, true, []int{1, 2})
	assert.Equal(t, first, held, "the same locks")
	UnlockAll(held)

	held = tb.lockAll(held[:0], 3, true, []int{2, 5}) // other tags: from the table
	assert.Same(t, first[1], tb.m[tagKey{peer: 3, tag: 2, recv: true}])
	assert.NotSame(t, first[0], held[0])
	UnlockAll(held)

	tb.mu.Lock()
	tb.sweep()
	tb.mu.Unlock()
	assert.Empty(t, tb.m)
	again := tb.lockAll(held[:0], 3, true, []int{2, 5})
	assert.NotSame(t, first[1], again[0], "a swept lock is not reused")
	assert.Same(t, again[0], tb.m[tagKey{peer: 3, tag: 2, recv: true}])
	other, ok := tb.tryLockAll(nil, 3, true, []int{2})
	assert.False(t, ok, "the table's lock is the one held")
	assert.Empty(t, other)
	UnlockAll(again)
	h, idle := tb.inUse()
	assert.Zero(t, h)
	assert.Equal(t, 2, idle)
}
