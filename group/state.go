// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

// A Slot names one kind of state that tdmpi's protocol keeps per group:
// the locks of the point-to-point tags, the cache of decoded metadata.
// The state of a group is made on first use (New) and dropped when the
// group is freed, so it lives exactly as long as the communicators it is
// about. Programs have no use for Slots; the packages that speak tdmpi's
// protocol declare theirs as package variables.
type Slot[T any] struct {
	// New makes the state of a group that has none yet.
	New func() *T
}

// Of returns the state s names in g, made by s.New on first use. Every
// call on one group returns the same value until g is freed; Of on a freed
// group returns a fresh value that is not kept.
func (s *Slot[T]) Of(g *Group) *T {
	if v, ok := g.slots.Load(s); ok {
		return v.(*T)
	}
	g.mu.Lock()
	freed := g.freed
	g.mu.Unlock()
	if freed {
		return s.New()
	}
	v, _ := g.slots.LoadOrStore(s, s.New())
	return v.(*T)
}
