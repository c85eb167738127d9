// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// protoState is a Group as tdmpi's protocol packages see it, through
// internal/proto: its methods implement proto.State, and are documented
// there. They are not the program's, so they are not Group's.
type protoState Group

func init() {
	proto.Register(proto.Hooks{
		Of:         func(g proto.Group) proto.State { return (*protoState)(g.(*Group)) },
		Departures: nextDeparture,
		PeerLeft:   peerLeft,
	})
}

func (s *protoState) LibComm() *mpi.Comm { return s.lib }

func (s *protoState) PayloadTag() int {
	t := &s.payload
	return int(t.base + (t.n.Add(1)-1)%t.span)
}

func (s *protoState) Lock() { s.protoMu.Lock() }

func (s *protoState) Unlock() { s.protoMu.Unlock() }

func (s *protoState) Collective(f func(busy func() bool) error) error {
	if s.colls.Add(1) > 1 {
		s.contended.Store(true)
	}
	defer s.colls.Add(-1)
	s.protoMu.Lock()
	defer s.protoMu.Unlock()
	return f(s.contended.Load)
}

func (s *protoState) Live(op string) error { return (*Group)(s).live(op) }

func (s *protoState) Break(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = cause
	}
}

func (s *protoState) Broken(op string) error {
	g := (*Group)(s)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.freed.Load():
		return g.errorf(op, "%w", ErrFreed)
	case g.broken != nil:
		return g.errorf(op, "%w: %w", ErrBroken, g.broken)
	}
	return nil
}

func (s *protoState) Departed() <-chan struct{} { return s.leave.departed }

func (s *protoState) Left(r int) error { return (*Group)(s).left(r) }

func (s *protoState) Gone(r int) <-chan struct{} { return (*Group)(s).goneCh(r) }

// slotState is the state of one proto.Slot in one group.
type slotState struct{ v any }

func (s *protoState) Slot(i int) any {
	if st := s.slots[i].Load(); st != nil {
		return st.v
	}
	return nil
}

// NewSlot stores make's value in slot i, unless the group has one there
// already, or is freed: then the value is returned and not kept.
func (s *protoState) NewSlot(i int, make func() any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed.Load() {
		return make()
	}
	if st := s.slots[i].Load(); st != nil {
		return st.v
	}
	v := make()
	s.slots[i].Store(&slotState{v: v})
	return v
}
