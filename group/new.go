// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"hash/fnv"

	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/mpi"
)

// Tags on LibComm reserved for MPI_Comm_create_group in New.
const (
	createTagBase  = 31744
	createTagCount = 1024
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
// group and gets (nil, nil); other colors must not be negative. Split takes
// g's protocol lock, so it must not be called inside Exclusive.
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
	err := g.Exclusive(func() error {
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
