// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// A Slot names one kind of state that tdmpi's protocol keeps per group:
// the locks of the point-to-point tags, the cache of decoded metadata.
// The state of a group is made on first use (New) and dropped when the
// group is freed, so it lives exactly as long as the communicators it is
// about. Programs have no use for Slots; the packages that speak tdmpi's
// protocol declare theirs as package variables: a process may use at most
// 32 Slots, and a Slot made anew (a local variable) takes another each time.
type Slot[T any] struct {
	// New makes the state of a group that has none yet.
	New func() *T

	once sync.Once
	idx  int // in Group.slots, set on first use
}

// maxSlots bounds the Slots a process uses: each group keeps an array of
// that many states, which Of reads without hashing or locking (a sync.Map
// took 0.05 us per lookup, a fifth of a small Send's own time).
const maxSlots = 32

// slotCount counts the Slots that took an index.
var slotCount atomic.Int32

// slotState is the state of one Slot in one group.
type slotState struct{ v any }

// Of returns the state s names in g, made by s.New on first use. Every
// call on one group returns the same value until g is freed; Of on a freed
// group returns a fresh value that is not kept. It panics if s is the
// process's maxSlots+1-th Slot.
func (s *Slot[T]) Of(g *Group) *T {
	s.once.Do(func() {
		s.idx = int(slotCount.Add(1)) - 1
		if s.idx >= maxSlots {
			panic(fmt.Sprintf("group: more than %d Slots in one process (declare them as package variables)", maxSlots))
		}
	})
	if st := g.slots[s.idx].Load(); st != nil {
		return st.v.(*T)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed.Load() {
		return s.New()
	}
	if st := g.slots[s.idx].Load(); st != nil {
		return st.v.(*T)
	}
	v := s.New()
	g.slots[s.idx].Store(&slotState{v: v})
	return v
}
