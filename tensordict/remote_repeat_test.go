// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestInitRemoteRepeated: a run of InitRemotes of one small structure and
// frame size, which the receiver takes into a buffer of the last frame's
// size (recvInitFrame) and copies into memory allocated before the frame
// arrived (spareFor), interrupted by garbage of the same size, another
// structure of the same size and a lower limit. Each result is right and
// has memory of its own; the garbage and the limit are refused with their
// errors. With WithAllocator, every result is in a storage of the
// allocator's, and a receive whose limit its size passes does not call
// the allocator.
func TestInitRemoteRepeated(t *testing.T) {
	world := mpitest.Need(t, 2)
	for _, withAlloc := range []bool{false, true} {
		mpitest.Run(t, fmt.Sprintf("allocator=%v", withAlloc), func(t *testing.T) {
			// A group of its own for each variant (ranks 0 and 1 in one),
			// which starts with nothing learnt from the peer.
			g, err := world.Split(world.Rank()/2, world.Rank())
			require.NoError(t, err)
			defer func() { require.NoError(t, g.Free()) }()
			if world.Rank() > 1 {
				return
			}
			testInitRemoteRepeated(t, g, withAlloc)
		})
	}
}

// testInitRemoteRepeated is TestInitRemoteRepeated's walk on g, with or
// without an allocator on the receiver.
func testInitRemoteRepeated(t *testing.T, g *group.Group, withAlloc bool) {
	build := func(t *testing.T, round float64) *TensorDict { return countedTD(t, 100, round) }
	src := build(t, 0)
	// Described by its kept structure from the second send on, x's frame
	// is a bare header and the storage.
	size := wire.Size + src.cons.st.Len()
	// y: another structure whose first frame (with its metadata) is size
	// bytes too.
	y := frameOfSize(t, size)

	// What each receive of rank 1 gets, and with which options.
	type step struct {
		name       string
		x          float64 // the round of x sent, or -1
		y, garbage bool
		opts       []RemoteOption
		err        error
	}
	steps := []step{
		{name: "first, with its metadata", x: 0},
		{name: "second, described", x: 1},
		{name: "third, described", x: 2},
		{name: "fourth, described", x: 3},
		{name: "fifth, described", x: 4},
		{name: "garbage of the same size", x: -1, garbage: true, err: wire.ErrHeader},
		{name: "x after garbage", x: 5},
		{name: "x over a lower limit", x: 6, opts: []RemoteOption{WithMaxBytes(16)}, err: wire.ErrLimit},
		{name: "x within the limit again", x: 7},
		{name: "y of the same size", x: -1, y: true},
		{name: "x after y", x: 8},
		{name: "x again", x: 9},
		{name: "x again, y kept since", x: 10},
		{name: "x once more", x: 11},
	}
	if g.Rank() == 0 {
		for _, s := range steps {
			switch {
			case s.garbage:
				require.NoError(t, mpi.Send(proto.LibComm(g), bytes.Repeat([]byte{0xff}, size), 1, xfer.InitHeaderTag))
			case s.y:
				require.NoError(t, y.InitRemote(1, WithGroup(g)))
			default:
				// The same TensorDict, refilled: sent from its state.
				for _, it := range build(t, s.x).Items(IncludeNested(), LeavesOnly()) {
					require.NoError(t, src.SetInPlace(it.Key, it.Tensor))
				}
				require.NoError(t, src.InitRemote(1, WithGroup(g)))
			}
		}
		return
	}
	// The allocator hands out a new storage each call, and remembers it.
	handed := map[*tensor.Storage]bool{}
	calls := 0
	alloc := WithAllocator(func(n int) (*tensor.Storage, error) {
		calls++
		st := tensor.NewStorage(n)
		handed[st] = true
		return st, nil
	})
	type result struct {
		td    *TensorDict
		round float64
	}
	var kept []result // x's results, checked again at the end
	for _, s := range steps {
		opts := append(s.opts[:len(s.opts):len(s.opts)], WithGroup(g))
		if withAlloc {
			opts = append(opts[:len(opts):len(opts)], alloc)
		}
		before := calls
		got, err := FromRemoteInit(0, opts...)
		if s.err != nil {
			require.ErrorIs(t, err, s.err, s.name)
			if errors.Is(s.err, wire.ErrLimit) {
				assert.Equal(t, before, calls, "%s: the allocator was called", s.name)
			}
			continue
		}
		require.NoError(t, err, s.name)
		if withAlloc {
			assert.True(t, handed[got.ConsolidatedStorage()], "%s: the result is not in the allocator's storage", s.name)
		}
		want := y
		if !s.y {
			want = build(t, s.x)
			kept = append(kept, result{got, s.x})
		}
		requireSameTD(t, want, got)
	}
	// Every result kept its own memory: writing one changes no other.
	for i, r := range kept {
		a, err := r.td.Get(K("a"))
		require.NoError(t, err)
		require.NoError(t, a.Fill(-1))
		for _, other := range kept[i+1:] {
			eq, err := other.td.Eq(build(t, other.round))
			require.NoError(t, err)
			assert.True(t, eq.All(), "the result of round %v changed by writing that of round %v", other.round, r.round)
		}
	}
}
