// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"sync"

	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
)

// firsts holds each group's Firsts.
var firsts = proto.Slot[Firsts]{New: func() *Firsts { return &Firsts{first: map[int]int{}} }}

// FirstsOf returns g's record of its broadcasts' first messages.
func FirstsOf(g proto.Group) *Firsts { return firsts.Of(g) }

// Firsts records, for one group, how its next broadcast starts: the length
// of the first message from each root, and the root it starts from
// without comparing the roots first. A broadcast's count must be the same
// on every rank, and the receivers cannot know how long the next frame
// is: every rank sets the length of the next first message from a root
// once the ranks agreed that all took the last one (Agreed), from what
// all of them saw, so that all send and receive first messages of the
// same length (wire.NextBcastFirst).
type Firsts struct {
	mu    sync.Mutex
	first map[int]int // by root rank; absent: wire.BcastFirst
	// last is the root of the last broadcast every rank agreed on, plus
	// one (0: none); steady is last when the one before had that root
	// too. A root that alternates never pays for a first message from the
	// wrong root.
	last, steady int
}

// TakeSteady returns the root the next broadcast starts from without
// comparing the roots first (-1: none, the ranks compare them first), the
// root of the last two broadcasts, and forgets it: only a broadcast that
// succeeds sets it again (Agreed), the same on every rank.
func (t *Firsts) TakeSteady() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.steady - 1
	t.steady = 0
	return r
}

// Of returns the length of the next first message from root.
func (t *Firsts) Of(root int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.first[root], wire.BcastFirst)
}

// Agreed records that every rank took a first message of first bytes from
// root, which started a frame of frameLen bytes.
func (t *Firsts) Agreed(root, first int, frameLen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if next := wire.NextBcastFirst(first, frameLen); next != first {
		t.first[root] = next
	}
	t.steady = 0
	if t.last == root+1 {
		t.steady = root + 1
	}
	t.last = root + 1
}
