// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package proto

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// A Slot names one kind of state that tdmpi's protocol keeps per group:
// the locks of the point-to-point tags, the cache of decoded metadata.
// The state of a group is made on first use (New) and dropped when the
// group is freed, so it lives exactly as long as the communicators it is
// about. The packages that speak tdmpi's protocol declare their Slots as
// package variables: a process may use at most MaxSlots, and a Slot made
// anew (a local variable) takes another each time.
type Slot[T any] struct {
	// New makes the state of a group that has none yet.
	New func() *T

	once sync.Once
	idx  int // in the group's slots, set on first use
}

// MaxSlots bounds the Slots a process uses: each group keeps an array of
// that many states, which Of reads without hashing or locking (a sync.Map
// took 0.05 us per lookup, a fifth of a small Send's own time).
const MaxSlots = 32

// slotCount counts the Slots that took an index.
var slotCount atomic.Int32

// Of returns the state s names in g, made by s.New on first use. Every
// call on one group returns the same value until g is freed; Of on a freed
// group returns a fresh value that is not kept. It panics if s is the
// process's MaxSlots+1-th Slot.
func (s *Slot[T]) Of(g Group) *T {
	s.once.Do(func() {
		s.idx = int(slotCount.Add(1)) - 1
		if s.idx >= MaxSlots {
			panic(fmt.Sprintf("proto: more than %d Slots in one process (declare them as package variables)", MaxSlots))
		}
	})
	st := of(g)
	if v := st.Slot(s.idx); v != nil {
		return v.(*T)
	}
	return st.NewSlot(s.idx, func() any { return s.New() }).(*T)
}
