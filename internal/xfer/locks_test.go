// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
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

// A table keeps at most tagLockIdle idle locks, and the send and receive
// locks of a tag, and the locks of two peers, are distinct.
func TestTagLocksBounded(t *testing.T) {
	tb := newTagTable()
	tags := make([]int, tagLockIdle+100)
	for i := range tags {
		tags[i] = i
	}
	held := tb.lockAll(nil, 0, false, tags)
	h, idle := tb.inUse()
	require.Equal(t, len(tags), h)
	require.Zero(t, idle)
	UnlockAll(held)
	h, idle = tb.inUse()
	assert.Zero(t, h)
	assert.Equal(t, tagLockIdle, idle)

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
