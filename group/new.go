// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"hash/fnv"
	"slices"

	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/mpi"
)

// Tags on the library communicator (proto.LibComm) reserved for New:
// MPI_Comm_create_group's, and the one on which the members compare their
// rank lists first.
const (
	createTagBase  = 31744
	createTagCount = 1023
	orderTag       = createTagBase + createTagCount // 32767
)

// New makes the subgroup of the ranks of g listed in ranks, like
// torch.distributed.new_group: rank i of the subgroup is ranks[i] of g.
// Only the listed ranks call New, all with the same list; ranks of g not
// in the list do not take part (MPI_Comm_create_group). Members that make
// several subgroups with overlapping ranks must make them in the same order.
//
// New checks the list before any MPI call: it returns an error if the list
// is empty, has a rank outside [0, g.Size()) or a repeated rank, or does
// not hold the caller's rank (that error wraps ErrNotMember).
func (g *Group) New(ranks []int) (*Group, error) {
	if err := g.live("New"); err != nil {
		return nil, err
	}
	if err := g.checkRanks(ranks); err != nil {
		return nil, err
	}
	if err := g.exclusive(func() error { return g.sameOrder(ranks) }); err != nil {
		return nil, err
	}
	comm, err := g.lib.CreateGroup(ranks, createTag(ranks))
	if err != nil {
		return nil, g.errorf("New", "ranks %v: %w", ranks, err)
	}
	sub, err := newGroup(comm, false)
	if err != nil {
		return nil, g.errorf("New", "ranks %v: %w", ranks, err)
	}
	log.Logger().Debug().Stringer("parent", g).Ints("ranks", ranks).Stringer("group", sub).Msg("group: New")
	return sub, nil
}

// sameOrder checks, before MPI_Comm_create_group (which would hang or
// build inconsistent groups otherwise), that every member passed ranks in
// the same order: each member sends its list to the lowest rank of the
// set, which compares them with its own and answers every member with its
// verdict and its own list. Members must call New for the same set.
func (g *Group) sameOrder(ranks []int) error {
	leader := slices.Min(ranks)
	mine := make([]int64, len(ranks))
	for i, r := range ranks {
		mine[i] = int64(r)
	}
	if g.rank != leader {
		if err := mpi.Send(g.lib, mine, leader, orderTag); err != nil {
			return g.errorf("New", "ranks %v: sending the list to rank %d: %w", ranks, leader, err)
		}
		st, err := mpi.Probe(g.lib, leader, orderTag)
		if err != nil {
			return g.errorf("New", "ranks %v: waiting for rank %d's verdict: %w", ranks, leader, err)
		}
		n := st.Count(8)
		if n < 1 || n > int64(g.size)+1 {
			return g.errorf("New", "ranks %v: rank %d's verdict has %d values", ranks, leader, n)
		}
		v := make([]int64, n)
		if _, err := mpi.Recv(g.lib, v, leader, orderTag); err != nil {
			return g.errorf("New", "ranks %v: receiving rank %d's verdict: %w", ranks, leader, err)
		}
		if v[0] != 0 {
			return g.errorf("New", "ranks %v, rank %d listed %v: %w", ranks, leader, v[1:], ErrOrder)
		}
		return nil
	}
	bad := -1
	var theirs []int64
	for _, m := range ranks {
		if m == leader {
			continue
		}
		st, err := mpi.Probe(g.lib, m, orderTag)
		if err != nil {
			return g.errorf("New", "ranks %v: waiting for rank %d's list: %w", ranks, m, err)
		}
		n := st.Count(8)
		if n < 0 || n > int64(g.size) {
			n = 0 // refused below; the message is still received
		}
		got := make([]int64, max(n, 1))
		if _, err := mpi.Recv(g.lib, got[:n], m, orderTag); err != nil {
			return g.errorf("New", "ranks %v: receiving rank %d's list: %w", ranks, m, err)
		}
		if bad < 0 && !slices.Equal(got[:n], mine) {
			bad, theirs = m, got[:n]
		}
	}
	verdict := append([]int64{0}, mine...)
	if bad >= 0 {
		verdict[0] = 1
	}
	for _, m := range ranks {
		if m == leader {
			continue
		}
		if err := mpi.Send(g.lib, verdict, m, orderTag); err != nil {
			return g.errorf("New", "ranks %v: sending the verdict to rank %d: %w", ranks, m, err)
		}
	}
	if bad >= 0 {
		return g.errorf("New", "ranks %v, rank %d listed %v: %w", ranks, bad, theirs, ErrOrder)
	}
	return nil
}

// checkRanks validates the rank list of New.
func (g *Group) checkRanks(ranks []int) error {
	if len(ranks) == 0 {
		return g.errorf("New", "empty rank list")
	}
	seen := make(map[int]int, len(ranks))
	member := false
	for i, r := range ranks {
		if r < 0 || r >= g.size {
			return g.errorf("New", "ranks[%d] = %d is out of range [0,%d)", i, r, g.size)
		}
		if j, dup := seen[r]; dup {
			return g.errorf("New", "ranks[%d] = %d repeats ranks[%d]", i, r, j)
		}
		seen[r] = i
		if r == g.rank {
			member = true
		}
	}
	if !member {
		return g.errorf("New", "ranks %v do not hold the caller's rank %d, and only members call New: %w",
			ranks, g.rank, ErrNotMember)
	}
	return nil
}

// createTag derives the MPI_Comm_create_group tag from the rank list, so
// that concurrent creations of different subgroups are told apart.
func createTag(ranks []int) int {
	h := fnv.New32a()
	var b [8]byte
	for _, r := range ranks {
		for i := range b {
			b[i] = byte(uint64(r) >> (8 * i))
		}
		h.Write(b[:])
	}
	return createTagBase + int(h.Sum32()%createTagCount)
}

// Split partitions g by color, as MPI_Comm_split: the ranks that give the
// same color form a new group, ordered by key and then by rank in g. Every
// rank of g calls Split. A rank that gives mpi.Undefined as color joins no
// group and gets (nil, nil); other colors must not be negative. Split
// takes turns with tdmpi's operations on g in other goroutines (it holds
// g's protocol lock: library code must not call it inside
// proto.Exclusive).
func (g *Group) Split(color, key int) (*Group, error) {
	if err := g.live("Split"); err != nil {
		return nil, err
	}
	if color < 0 && color != mpi.Undefined {
		return nil, g.errorf("Split", "color %d is negative (only mpi.Undefined is allowed)", color)
	}
	// Split is collective over LibComm: keep it from interleaving with a
	// library protocol of another goroutine.
	var comm *mpi.Comm
	err := g.exclusive(func() error {
		var err error
		comm, err = g.lib.Split(color, key)
		return err
	})
	if err != nil {
		return nil, g.errorf("Split", "color %d key %d: %w", color, key, err)
	}
	if comm == nil {
		return nil, nil
	}
	sub, err := newGroup(comm, false)
	if err != nil {
		return nil, g.errorf("Split", "color %d key %d: %w", color, key, err)
	}
	log.Logger().Debug().Stringer("parent", g).Int("color", color).Int("key", key).Stringer("group", sub).Msg("group: Split")
	return sub, nil
}
