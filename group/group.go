// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// Group is a set of ranks that communicate: the world, or a subgroup made by
// New or Split. It owns the user's communicator (Comm) and a private
// duplicate for the library's traffic, which programs never see. Its
// methods are safe for concurrent use, except Free.
type Group struct {
	comm  *mpi.Comm // the user's communicator
	lib   *mpi.Comm // duplicate of comm for tdmpi's protocol messages
	rank  int
	size  int
	world bool
	seq   uint64 // creation order, for Finalize

	torch   bool   // world group with torch peers: lib is comm (see torch.go)
	goGroup *Group // the Go ranks' group when torch is set

	protoMu sync.Mutex // the protocol lock (proto.Lock, proto.Exclusive)

	// colls counts this process's collectives on g that are running or
	// waiting for protoMu; contended is set, for good, when it exceeds one
	// (see proto.Collective).
	colls     atomic.Int32
	contended atomic.Bool

	nodeMap atomic.Pointer[[]uint64]                  // see SameNode
	payload payloadTags                               // see proto.PayloadTag
	slots   [proto.MaxSlots]atomic.Pointer[slotState] // the protocol's state, by proto.Slot

	mu     sync.Mutex  // guards broken, leave, and freeing
	freed  atomic.Bool // set once, by free, with mu held
	broken error       // why g is broken (see proto.Break), or nil
	leave  leaveState  // the ranks that left g (see leave.go)
}

// newGroup makes a group of comm, duplicating it for the library. On error
// it frees comm unless comm is the world; the error has no "group:" prefix,
// for the caller to add.
func newGroup(comm *mpi.Comm, world bool) (*Group, error) {
	g := &Group{comm: comm, rank: comm.Rank(), size: comm.Size(), world: world}
	lib, err := comm.Dup()
	if err != nil {
		if !world {
			err = errors.Join(err, comm.Free())
		}
		return nil, fmt.Errorf("duplicating the communicator for library traffic: %w", err)
	}
	g.lib = lib
	g.initPayloadTags()
	register(g)
	return g, nil
}

// Rank returns the rank of the calling process in g, from 0 to Size()-1.
func (g *Group) Rank() int { return g.rank }

// Size returns the number of ranks in g.
func (g *Group) Size() int { return g.size }

// IsWorld reports whether g is the world group of Init.
func (g *Group) IsWorld() bool { return g.world }

// Comm returns the user's communicator of g, for the program's own
// messages. It must not be freed; Free frees it.
func (g *Group) Comm() *mpi.Comm { return g.comm }

// Env returns the launcher environment Init detected.
func (g *Group) Env() hpc.Env {
	state.mu.Lock()
	defer state.mu.Unlock()
	return state.env
}

// String describes g, for example "group rank 1 of 4" or "world rank 0 of 2".
func (g *Group) String() string {
	kind := "group"
	if g.world {
		kind = "world"
	}
	return fmt.Sprintf("%s rank %d of %d", kind, g.rank, g.size)
}

// live returns an error wrapping ErrFreed, "group: <op>: rank r of n:
// group is freed", if g was freed (by Free, or by Finalize for every
// group), and nil otherwise.
func (g *Group) live(op string) error {
	if g.freed.Load() {
		return g.errorf(op, "%w", ErrFreed)
	}
	return nil
}

// Barrier blocks until every rank of g has called it.
func (g *Group) Barrier() error {
	if err := g.live("Barrier"); err != nil {
		return err
	}
	if err := g.comm.Barrier(); err != nil {
		return g.errorf("Barrier", "%w", err)
	}
	return nil
}

// exclusive runs f holding g's protocol lock (see proto.Exclusive).
func (g *Group) exclusive(f func() error) error {
	g.protoMu.Lock()
	defer g.protoMu.Unlock()
	return f()
}

// WorldRank returns the world rank of the process with rank groupRank in g.
func (g *Group) WorldRank(groupRank int) (int, error) {
	if err := g.live("WorldRank"); err != nil {
		return 0, err
	}
	if groupRank < 0 || groupRank >= g.size {
		return 0, g.errorf("WorldRank", "rank %d is out of range [0,%d)", groupRank, g.size)
	}
	if g.world {
		return groupRank, nil
	}
	r, err := g.comm.TranslateRank(groupRank, mpi.World())
	if err != nil {
		return 0, g.errorf("WorldRank", "%w", err)
	}
	return r, nil
}

// SameNode reports whether the process of rank r of g runs on the node of
// the calling process, as the MPI library sees nodes (MPI_Comm_split_type
// with MPI_COMM_TYPE_SHARED, at Init): messages between two processes of
// one node go through shared memory, between two nodes through the
// network. It reports true when it cannot tell: with WithTorchPeers (Init
// then makes no collective call of its own), when Init's exchange failed,
// and for a rank out of range. The first call on g maps all of g's ranks
// (one bit each); later calls read the map.
func (g *Group) SameNode(r int) bool {
	if r < 0 || r >= g.size {
		return true
	}
	return g.nodes()[r/64]&(1<<(r%64)) != 0
}

// OnOneNode reports whether every rank of g runs on the node of the
// calling process, as far as it can tell: SameNode of each rank.
func (g *Group) OnOneNode() bool {
	m := g.nodes()
	for i, w := range m {
		all := ^uint64(0)
		if i == len(m)-1 && g.size%64 != 0 {
			all = 1<<(g.size%64) - 1
		}
		if w != all {
			return false
		}
	}
	return true
}

// nodes returns g's map for SameNode, a bit for each rank, making it on
// the first call.
func (g *Group) nodes() []uint64 {
	if m := g.nodeMap.Load(); m != nil {
		return *m
	}
	return *g.mapNodes()
}

// mapNodes makes and records g's map for SameNode.
func (g *Group) mapNodes() *[]uint64 {
	local := nodeRanks.Load()
	m := make([]uint64, (g.size+63)/64)
	for r := range g.size {
		if local == nil || g.maybeOnNode(r, *local) {
			m[r/64] |= 1 << (r % 64)
		}
	}
	g.nodeMap.CompareAndSwap(nil, &m)
	return g.nodeMap.Load()
}

// maybeOnNode reports whether rank r of g is among local, the world
// ranks of this node, in increasing order, or cannot be told (WorldRank
// fails on a freed group).
func (g *Group) maybeOnNode(r int, local []int) bool {
	w, err := g.WorldRank(r)
	if err != nil {
		return true
	}
	_, found := slices.BinarySearch(local, w)
	return found
}

// nodeRanks holds the world ranks of the processes on this node, in
// increasing order, once Init has found them (see shareProcs).
var nodeRanks atomic.Pointer[[]int]

// GroupRank returns the rank in g of the process with world rank
// worldRank. The error wraps ErrNotMember if that process is not in g.
func (g *Group) GroupRank(worldRank int) (int, error) {
	if err := g.live("GroupRank"); err != nil {
		return 0, err
	}
	n := mpi.World().Size()
	if worldRank < 0 || worldRank >= n {
		return 0, g.errorf("GroupRank", "world rank %d is out of range [0,%d)", worldRank, n)
	}
	if g.world {
		return worldRank, nil
	}
	r, err := mpi.World().TranslateRank(worldRank, g.comm)
	if err != nil {
		return 0, g.errorf("GroupRank", "%w", err)
	}
	if r == mpi.Undefined {
		return 0, g.errorf("GroupRank", "world rank %d: %w", worldRank, ErrNotMember)
	}
	return r, nil
}

// Free releases g's communicators. It is collective over g: every rank of
// g calls it, after its last use of g. Freeing a freed group does nothing.
// The world group is freed by Finalize; Free on it returns an error.
func (g *Group) Free() error {
	if g.world {
		return g.errorf("Free", "the world group is freed by Finalize")
	}
	return g.free()
}

func (g *Group) free() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed.Load() {
		return nil
	}
	g.freed.Store(true)
	for i := range g.slots {
		g.slots[i].Store(nil)
	}
	unregister(g)
	var errs []error
	if g.lib != g.comm {
		if err := g.lib.Free(); err != nil {
			errs = append(errs, err)
		}
	}
	if !g.world {
		if err := g.comm.Free(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return g.errorf("Free", "%w", err)
	}
	log.Logger().Debug().Stringer("group", g).Msg("group: freed")
	return nil
}
