// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"errors"
	"fmt"
)

// Errors matched with errors.Is.
var (
	// ErrFreed is wrapped by the errors of operations on a freed group,
	// or on any group after Finalize.
	ErrFreed = errors.New("group is freed")

	// ErrNotMember is wrapped by the errors of New when the caller is
	// not among the ranks, and of GroupRank for a rank outside the group.
	ErrNotMember = errors.New("not a member of the group")

	// ErrNotInitialized is wrapped by the errors of operations that need
	// Init first.
	ErrNotInitialized = errors.New("MPI is not initialized: call group.Init")

	// ErrBroken is wrapped by the errors of collectives on a group on
	// which this rank gave up a collective step that MPI still has in
	// progress (its context ended first), or had a step fail in MPI, or
	// found the ranks in different collectives (see proto.Break in internal/proto), or
	// which a rank has left (ErrPeerLeft). MPI pairs a communicator's
	// collectives by their order, so every later collective on it would
	// be paired with the wrong step: the group can only be freed.
	ErrBroken = errors.New("group is broken")

	// ErrPeerLeft is wrapped by the errors of calls that wait for a rank
	// that has left the group (it called Finalize, after its program
	// returned an error, say): a receive from it, and every collective on
	// the group. The error names the rank.
	ErrPeerLeft = errors.New("has left the group (it called Finalize)")
)

// errorf returns an error "group: <op>: rank <r> of <n>: <message>".
func (g *Group) errorf(op, format string, args ...any) error {
	return fmt.Errorf("group: %s: rank %d of %d: %w", op, g.rank, g.size, fmt.Errorf(format, args...))
}

// ErrOrder is wrapped by the error of New when the members of the new
// group listed its ranks in different orders (MPI_Comm_create_group needs
// one order: the subgroup's ranks would differ between its members).
var ErrOrder = errors.New("members list the ranks in different orders")
