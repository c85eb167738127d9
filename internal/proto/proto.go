// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package proto

import (
	"fmt"

	"github.com/tdmpi/tdmpi/mpi"
)

// Group is a *group.Group. The interface holds what this package needs
// of its public API, so that the compiler refuses most other values.
type Group interface {
	Rank() int
	Size() int
}

// State is a group's protocol state, as package group implements it on an
// unexported type: see the functions of the same names.
type State interface {
	LibComm() *mpi.Comm
	PayloadTag() int
	Lock()
	Unlock()
	Collective(f func(busy func() bool) error) error
	Live(op string) error
	Break(cause error)
	Broken(op string) error
	Departed() <-chan struct{}
	Left(r int) error
	Gone(r int) <-chan struct{}
	// Slot returns the state in slot i, or nil if there is none yet;
	// NewSlot stores the one make returns, unless another goroutine
	// stored one first, and returns the stored one.
	Slot(i int) any
	NewSlot(i int, make func() any) any
}

// Hooks are what package group registers.
type Hooks struct {
	// Of returns the state of the *group.Group g.
	Of func(g Group) State
	// Departures and PeerLeft implement the functions of those names.
	Departures func() (next <-chan struct{}, before bool)
	PeerLeft   func(c *mpi.Comm, r int) error
}

var hooks Hooks

// Register installs package group's hooks; group's init calls it.
func Register(h Hooks) { hooks = h }

// of returns g's state.
func of(g Group) State {
	if hooks.Of == nil {
		panic(fmt.Sprintf("proto: package group is not linked in (group %v)", g))
	}
	return hooks.Of(g)
}

// LibComm returns g's private communicator for tdmpi's protocol messages.
// It has the same ranks as the user's communicator (Comm) but its own
// message space: nothing sent on Comm is received on LibComm, and the
// reverse. Its tag space: below group.MaxUserTag the tags users give
// the library's messages, then the HeaderTags header tags, then the
// payload tags PayloadTag hands out.
func LibComm(g Group) *mpi.Comm { return of(g).LibComm() }

// PayloadTag returns the next tag for a payload on LibComm(g), cycling
// through g's payload range, so that concurrent transfers between the same
// ranks each have a tag of their own (the sender carries it in its
// header). It is safe for concurrent use.
func PayloadTag(g Group) int { return of(g).PayloadTag() }

// Lock takes g's protocol lock: while one goroutine holds it, no other
// goroutine of this process runs a library protocol on g. Unlock releases
// it. Prefer Exclusive.
func Lock(g Group) { of(g).Lock() }

// Unlock releases the lock taken by Lock.
func Unlock(g Group) { of(g).Unlock() }

// Exclusive runs f holding g's protocol lock and returns its error.
// Library operations that exchange several messages on LibComm (a
// broadcast of a header then a payload, for example) run inside
// Exclusive, so that another goroutine's operation on the same group
// cannot interleave with them.
func Exclusive(g Group, f func() error) error {
	s := of(g)
	s.Lock()
	defer s.Unlock()
	return f()
}

// Collective runs f as one collective operation on g, holding g's protocol
// lock like Exclusive. busy, which f may call any number of times, reports
// whether this process has ever had two collectives on g at once: another
// goroutine entered a collective on g while one was waiting or running.
// Once true it stays true for the life of g.
//
// MPI pairs the collectives of a communicator by their order on each rank,
// so collectives started on one group from several goroutines are paired
// in whatever order each rank's scheduler picked, and data from different
// calls would be combined. The library's collectives treat busy as an
// error that every rank learns at the collective's agreement step (a rank
// whose own calls were sequential learns it from a peer), so that from
// then on every collective on g fails on every rank instead of returning
// wrong data, and a call during which busy became true fails on the rank
// that saw it. Concurrent collectives need a group per goroutine (New).
func Collective(g Group, f func(busy func() bool) error) error {
	return of(g).Collective(f)
}

// Live returns an error wrapping group.ErrFreed, "group: <op>: rank r of
// n: group is freed", if g was freed (by Free, or by Finalize for every
// group), and nil otherwise. Protocols on g's communicators check it
// first, so that a freed group is reported as such rather than as an MPI
// error about an invalid communicator.
func Live(g Group, op string) error { return of(g).Live(op) }

// Break marks g broken, for good: cause says which collective step this
// rank gave up while MPI still has it in progress (its context ended, for
// example). From then on Broken returns an error wrapping group.ErrBroken
// and cause, and the library's collectives on g fail at once on this rank.
// The other ranks learn nothing: their collectives on g are bounded only
// by their own contexts. The step's buffers stay pinned until MPI
// completes it (see mpi.Request), and group.Finalize refuses to run until
// then. Only the first cause is kept.
func Break(g Group, cause error) { of(g).Break(cause) }

// Broken returns nil if g is usable for collectives, and otherwise an
// error "group: <op>: rank r of n: group is broken: <cause>" wrapping
// group.ErrBroken and the cause given to Break (or an error wrapping
// group.ErrPeerLeft naming the rank that left g, see Departed), or
// group.ErrFreed if g is freed.
func Broken(g Group, op string) error { return of(g).Broken(op) }

// Departed returns a channel that is closed once a rank of g has left it
// (called Finalize): a collective on g can then never complete, and
// Broken returns an error naming that rank, wrapping group.ErrPeerLeft. A
// collective step that no context bounds waits until it closes.
func Departed(g Group) <-chan struct{} { return of(g).Departed() }

// Left returns an error wrapping group.ErrPeerLeft if rank r of g has
// left it, and nil otherwise. For r = mpi.AnySource it returns one when
// every other rank has left: a receive from any source can no longer be
// matched.
func Left(g Group, r int) error { return of(g).Left(r) }

// Gone returns a channel that is closed once rank r of g has left it (Left
// then returns its error), or nil, which never closes, for an r out of
// g's range. A send to r that no context bounds, which may wait for r to
// take it, waits until it closes.
func Gone(g Group, r int) <-chan struct{} { return of(g).Gone(r) }

// Departures returns a channel that is closed when a rank of some group
// of this process is next found gone, and whether one was found before. A
// wait for a peer that no context bounds gives it as its done channel,
// checks PeerLeft before it starts when before is true, and again each
// time the channel closes: then it calls Departures again.
func Departures() (next <-chan struct{}, before bool) { return hooks.Departures() }

// PeerLeft returns Left(g, r) for the live group g whose library
// communicator is c, and nil if there is none: for receives that know the
// communicator only.
func PeerLeft(c *mpi.Comm, r int) error { return hooks.PeerLeft(c, r) }
