// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestBroadcastModePrepared: after two broadcast-mode InitRemotes in a row
// of one small structure from a root, its receivers make their result
// before the next first message arrives (bcastKnown), and take a frame
// that repeats the last one but for its storage's bytes with a copy of
// them. Another structure whose frame has the same length, a lower
// limit, an allocator or a Bool leaf are received as before (the last two
// prepare nothing after them until frames repeat again), and each result
// has memory of its own.
func TestBroadcastModePrepared(t *testing.T) {
	world := mpitest.Need(t, 2)
	// A group of its own, which starts with nothing learnt from the root.
	g, err := world.Split(0, world.Rank())
	require.NoError(t, err)
	defer func() { require.NoError(t, g.Free()) }()

	x := func(round float64) *TensorDict { return countedTD(t, 100, round) }
	p, err := planSend("InitRemote", x(0))
	require.NoError(t, err)
	y := frameOfSize(t, wire.Size+len(p.class)+len(p.meta)+p.total)
	flags := New()
	require.NoError(t, flags.Set(K("ok"), tensor.Full(tensor.Bool, 1, 5)))
	require.NoError(t, flags.Set(K("v"), tensor.Full(tensor.Float64, 2, 5)))
	flags, err = flags.Consolidate()
	require.NoError(t, err)

	type step struct {
		name       string
		send       *TensorDict
		round      float64 // of x, when send is nil
		opts       []RemoteOption
		err        error
		made, used int64
	}
	alloc := WithAllocator(func(n int) (*tensor.Storage, error) { return tensor.NewStorage(n), nil })
	steps := []step{
		{name: "first", round: 0},
		{name: "second", round: 1},
		{name: "third: prepared", round: 2, made: 1, used: 1},
		{name: "fourth: prepared", round: 3, made: 1, used: 1},
		{name: "another structure, as long", send: y, made: 1},
		{name: "x after y", round: 4},
		{name: "x again", round: 5},
		{name: "x prepared again", round: 6, made: 1, used: 1},
		{name: "x over a lower limit", round: 7, opts: []RemoteOption{WithMaxBytes(16)}, err: wire.ErrLimit},
		{name: "x within the limit again", round: 8, made: 1, used: 1},
		{name: "x with an allocator", round: 9, opts: []RemoteOption{alloc}},
		{name: "x without", round: 10},
		{name: "x without again", round: 11},
		{name: "x without, prepared", round: 12, made: 1, used: 1},
		{name: "a Bool leaf", send: flags, made: 1},
		{name: "a Bool leaf again", send: flags},
		{name: "a Bool leaf, a third time", send: flags},
	}
	type result struct {
		td    *TensorDict
		round float64
	}
	var kept []result // x's results, checked again at the end
	for _, s := range steps {
		want := s.send
		if want == nil {
			want = x(s.round)
		}
		opts := append(s.opts[:len(s.opts):len(s.opts)], WithGroup(g), WithBroadcast())
		if g.Rank() == 0 {
			err := want.InitRemote(0, WithGroup(g), WithBroadcast())
			if s.err != nil {
				require.Error(t, err, s.name)
			} else {
				require.NoError(t, err, s.name)
			}
			continue
		}
		made, used := bcastKnownCounts.made.Load(), bcastKnownCounts.used.Load()
		got, err := FromRemoteInit(0, opts...)
		assert.Equal(t, s.made, bcastKnownCounts.made.Load()-made, "%s: prepared", s.name)
		assert.Equal(t, s.used, bcastKnownCounts.used.Load()-used, "%s: taken", s.name)
		if s.err != nil {
			require.ErrorIs(t, err, s.err, s.name)
			continue
		}
		require.NoError(t, err, s.name)
		requireSameTD(t, want, got)
		if s.send == nil {
			kept = append(kept, result{got, s.round})
		}
	}
	// Every result kept its own memory: writing one changes no other.
	for i, r := range kept {
		a, err := r.td.Get(K("a"))
		require.NoError(t, err)
		require.NoError(t, a.Fill(-1))
		for _, other := range kept[i+1:] {
			eq, err := other.td.Eq(x(other.round))
			require.NoError(t, err)
			assert.True(t, eq.All(), "the result of round %v changed by writing that of round %v", other.round, r.round)
		}
	}
}
