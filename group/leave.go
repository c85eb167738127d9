// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// Leaving. A rank that returns an error from its program (its deferred
// Finalize runs) while its peers wait for it in a tdmpi call must not
// leave them waiting forever, nor block in MPI_Finalize itself, which
// waits for every rank. So Finalize first tells every other rank of each
// of its groups that it leaves, with an empty message on the group's
// library communicator (leaveTag), then takes the notices of all of them
// (they all call Finalize in the end, as MPI requires), so that no notice
// stays unmatched. While the program runs, a watcher goroutine takes the
// notices that arrive, every leavePoll, and leaveGrace later records the
// rank as gone: the group is broken for collectives (proto.Broken,
// proto.Departed) and receives from that rank fail (proto.Left,
// proto.PeerLeft, proto.Departures), and so do sends to it (proto.Gone),
// in internal/xfer's waits that have no context to end them. Waits bounded by
// a context end when it does. The notices travel on the library
// communicators only: with WithTorchPeers, nothing on the world, which
// the torch ranks share.

// leaveTag is the tag of the leave notices: the last of the header tags.
const leaveTag = proto.HeaderTag + proto.HeaderTags - 1

// leavePoll is how often the watcher looks for leave notices.
const leavePoll = 100 * time.Millisecond

// leaveGrace is how long after its notice came a rank counts as gone: a
// rank that finished a collective step and left at once may still have
// its part of the step on the way to this rank (MPI orders messages of
// different tags and collectives in no way), and a step waited for must
// not be given up before that part came.
const leaveGrace = time.Second

// leaveState is what a group knows of the ranks that left it, guarded by
// the group's mu. Its slices are made on the first notice.
type leaveState struct {
	noticed  []bool // a notice from rank r was received
	nNoticed int
	left     []bool // rank r counts as gone (leaveGrace after its notice)
	nLeft    int
	departed chan struct{} // closed once a rank counts as gone
	// gone[r], made when a wait for rank r asks for it (goneCh), is
	// closed once r counts as gone.
	gone []chan struct{}
}

// departures is the process's signal that a rank of some group left.
var departures struct {
	mu   sync.Mutex
	ch   atomic.Pointer[chan struct{}]
	seen atomic.Bool // some rank of some group has left
}

func init() {
	ch := make(chan struct{})
	departures.ch.Store(&ch)
}

// nextDeparture is proto.Departures: a channel closed when a rank of some
// group is next found gone (its notice came leaveGrace ago), and whether
// one was found before.
func nextDeparture() (next <-chan struct{}, before bool) {
	return *departures.ch.Load(), departures.seen.Load()
}

// left is proto.Left: an error wrapping ErrPeerLeft if rank r of g (or,
// for mpi.AnySource, every other rank) has left it.
func (g *Group) left(r int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leftLocked(r)
}

func (g *Group) leftLocked(r int) error {
	l := &g.leave
	switch {
	case r == mpi.AnySource && l.nLeft > 0 && l.nLeft >= g.size-1:
		return fmt.Errorf("every other rank of %d %w", g.size, ErrPeerLeft)
	case r >= 0 && r < len(l.left) && l.left[r]:
		return fmt.Errorf("rank %d of %d %w", r, g.size, ErrPeerLeft)
	}
	return nil
}

// goneCh is proto.Gone: a channel closed once rank r of g counts as gone
// (at once if it does), and nil, which never closes, for a rank out of
// g's range.
func (g *Group) goneCh(r int) <-chan struct{} {
	if r < 0 || r >= g.size {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	l := &g.leave
	if l.gone == nil {
		l.gone = make([]chan struct{}, g.size)
	}
	if l.gone[r] == nil {
		l.gone[r] = make(chan struct{})
		if l.left != nil && l.left[r] {
			close(l.gone[r])
		}
	}
	return l.gone[r]
}

// peerLeft is proto.PeerLeft: left(r) of the live group whose library
// communicator is c, and nil if there is none.
func peerLeft(c *mpi.Comm, r int) error {
	state.regMu.Lock()
	var found *Group
	for g := range state.live {
		if g.lib == c && !g.torch {
			found = g
			break
		}
	}
	state.regMu.Unlock()
	if found == nil {
		return nil
	}
	return found.left(r)
}

// notices reports whether g takes part in leave notices: it has other
// ranks and a library communicator of its own.
func (g *Group) notices() bool { return g.size > 1 && !g.torch }

// gotNotice records the notice of rank r, which has left g, and marks r
// gone leaveGrace later. g.mu is held.
func (g *Group) gotNotice(r int) {
	l := &g.leave
	if r < 0 || r >= g.size || r == g.rank {
		return
	}
	if l.noticed == nil {
		l.noticed = make([]bool, g.size)
	}
	if l.noticed[r] {
		return
	}
	l.noticed[r] = true
	l.nNoticed++
	log.Logger().Debug().Stringer("group", g).Int("peer", r).Msg("group: a rank left")
	time.AfterFunc(leaveGrace, func() { g.markLeft(r) })
}

// markLeft marks rank r of g gone: g is broken, and the waits for r learn
// it (proto.Departed, proto.Departures).
func (g *Group) markLeft(r int) {
	g.mu.Lock()
	l := &g.leave
	if g.freed.Load() || l.left != nil && l.left[r] {
		g.mu.Unlock()
		return
	}
	if l.left == nil {
		l.left = make([]bool, g.size)
	}
	l.left[r] = true
	l.nLeft++
	if g.broken == nil {
		g.broken = g.leftLocked(r)
	}
	if l.nLeft == 1 {
		close(l.departed)
	}
	if l.gone != nil && l.gone[r] != nil {
		close(l.gone[r])
	}
	g.mu.Unlock()

	departures.mu.Lock()
	defer departures.mu.Unlock()
	departures.seen.Store(true)
	next := make(chan struct{})
	close(*departures.ch.Swap(&next))
}

// pollLeave takes the leave notices that have come for g.
func (g *Group) pollLeave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed.Load() || !g.notices() {
		return
	}
	for {
		var m mpi.Message
		ok, st, err := mpi.ImprobeInto(&m, g.lib, mpi.AnySource, leaveTag)
		if err != nil || !ok {
			if err != nil {
				log.Logger().Error().Err(err).Stringer("group", g).Msg("group: looking for leave notices")
			}
			return
		}
		if _, err := mpi.Mrecv(&m, []byte(nil)); err != nil {
			log.Logger().Error().Err(err).Stringer("group", g).Msg("group: receiving a leave notice")
			return
		}
		g.gotNotice(st.Source)
	}
}

// leaveGroups sends the leave notices of this rank to every other rank of
// each group of groups, then takes theirs: every rank of a group calls
// Finalize, so each notice is received, whoever left first.
func leaveGroups(groups []*Group) error {
	var errs []error
	for _, g := range groups {
		if !g.notices() {
			continue
		}
		for r := range g.size {
			if r == g.rank {
				continue
			}
			if err := mpi.Send(g.lib, []byte(nil), r, leaveTag); err != nil {
				errs = append(errs, g.errorf("Finalize", "telling rank %d that this rank leaves: %w", r, err))
			}
		}
	}
	for _, g := range groups {
		if g.notices() {
			errs = append(errs, g.takeNotices())
		}
	}
	return errors.Join(errs...)
}

// takeNotices receives the leave notices g's watcher has not taken.
func (g *Group) takeNotices() error {
	for {
		g.mu.Lock()
		n := g.leave.nNoticed
		g.mu.Unlock()
		if n >= g.size-1 {
			return nil
		}
		st, err := mpi.Recv(g.lib, []byte(nil), mpi.AnySource, leaveTag)
		if err != nil {
			return g.errorf("Finalize", "receiving the other ranks' leave notices: %w", err)
		}
		g.mu.Lock()
		g.gotNotice(st.Source)
		g.mu.Unlock()
	}
}

// watcher is the goroutine that takes leave notices while the program
// runs (see pollLeave).
var watcher struct {
	mu   sync.Mutex
	stop chan struct{} // closed to stop it; nil when it does not run
	done chan struct{} // closed when it has stopped
}

// startWatcher starts the watcher, unless it runs. Init calls it, and
// Finalize when it refuses to finalize.
func startWatcher() {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if watcher.stop != nil {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	watcher.stop, watcher.done = stop, done
	go func() {
		defer close(done)
		t := time.NewTicker(leavePoll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			state.regMu.Lock()
			groups := make([]*Group, 0, len(state.live))
			for g := range state.live {
				groups = append(groups, g)
			}
			state.regMu.Unlock()
			for _, g := range groups {
				g.pollLeave()
			}
		}
	}()
}

// stopWatcher stops the watcher, if it runs, and waits until it has: it
// makes no MPI call afterwards.
func stopWatcher() {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if watcher.stop == nil {
		return
	}
	close(watcher.stop)
	<-watcher.done
	watcher.stop, watcher.done = nil, nil
}
