// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestBroadcastModeRepeats: a run of broadcast-mode InitRemotes of one
// small structure from a root, interrupted by another structure whose
// frame has the same length, a lower limit, an allocator and a Bool leaf.
// Each result is right and has memory of its own, and the lower limit is
// refused.
func TestBroadcastModeRepeats(t *testing.T) {
	g := ownGroup(t)

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
		name  string
		send  *TensorDict
		round float64 // of x, when send is nil
		opts  []RemoteOption
		err   error
	}
	alloc := WithAllocator(func(n int) (*tensor.Storage, error) { return tensor.NewStorage(n), nil })
	steps := []step{
		{name: "first", round: 0},
		{name: "second", round: 1},
		{name: "third", round: 2},
		{name: "fourth", round: 3},
		{name: "another structure, as long", send: y},
		{name: "x after y", round: 4},
		{name: "x again", round: 5},
		{name: "x a third time", round: 6},
		{name: "x over a lower limit", round: 7, opts: []RemoteOption{WithMaxBytes(16)}, err: wire.ErrLimit},
		{name: "x within the limit again", round: 8},
		{name: "x with an allocator", round: 9, opts: []RemoteOption{alloc}},
		{name: "x without", round: 10},
		{name: "x without again", round: 11},
		{name: "x without, a third time", round: 12},
		{name: "a Bool leaf", send: flags},
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
		got, err := FromRemoteInit(0, opts...)
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

// TestBroadcastModeFirstLength: the first message of a broadcast-mode
// InitRemote takes the length of the last frame from its root (nextFirst),
// so that a root that sends frames of one length sends each whole in it.
// Every rank comes to the same length after every broadcast, including
// one that a receiver refused and one that the root gave up; frames
// shorter or longer than the first message, and storages apart from
// their frame, all arrive.
func TestBroadcastModeFirstLength(t *testing.T) {
	g := ownGroup(t)
	first := func() int { return bcastRoots.Of(g).of(0) }
	frameOf := func(m int) int {
		p, err := planSend("InitRemote", bigTD(t, 1, m, 0))
		require.NoError(t, err)
		return wire.Size + len(p.class) + len(p.meta) + p.total
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	const (
		small   = 8                 // 64 bytes
		mid     = 2048              // 16 KiB
		midLess = 1500              // 12 KiB: fills more than half of mid's first message
		large   = initInlineMax / 8 // 64 KiB, the largest inline storage
		apart   = 2 * initInlineMax / 8
	)
	oneNode := g.OnOneNode()
	grown := func(m int) int { return nextFirst(bcastFirst, uint64(frameOf(m)), oneNode) }
	steps := []struct {
		name      string
		m         int // float64 elements of the one leaf
		recvOpts  []RemoteOption
		rootOpts  []RemoteOption
		err       bool
		wantFirst int // after the step
	}{
		{name: "small", m: small, wantFirst: bcastFirst},
		{name: "16 KiB, in parts", m: mid, wantFirst: grown(mid)},
		{name: "16 KiB, whole", m: mid, wantFirst: grown(mid)},
		{name: "12 KiB, whole in 16 KiB's", m: midLess, wantFirst: grown(mid)},
		{name: "small again", m: small, wantFirst: bcastFirst},
		{name: "16 KiB, in parts again", m: mid, wantFirst: grown(mid)},
		{name: "64 KiB refused", m: large, recvOpts: []RemoteOption{WithMaxBytes(20000)}, err: true, wantFirst: grown(mid)},
		{name: "16 KiB after the refusal", m: mid, wantFirst: grown(mid)},
		{name: "64 KiB given up by the root", m: large, rootOpts: []RemoteOption{WithContext(cancelled)}, err: true, wantFirst: grown(mid)},
		{name: "16 KiB after the root gave up", m: mid, wantFirst: grown(mid)},
		{name: "storage apart", m: apart, wantFirst: bcastFirst},
		{name: "64 KiB, in parts", m: large, wantFirst: grown(large)},
		{name: "64 KiB, whole", m: large, wantFirst: grown(large)},
	}
	require.Greater(t, grown(mid), bcastFirst)
	require.Greater(t, grown(large), grown(mid))
	for i, s := range steps {
		base := float64(i)
		if g.Rank() == 0 {
			err := bigTD(t, 1, s.m, base).InitRemote(0, append(s.rootOpts[:len(s.rootOpts):len(s.rootOpts)], WithGroup(g), WithBroadcast())...)
			if s.err {
				require.Error(t, err, s.name)
			} else {
				require.NoError(t, err, s.name)
			}
		} else {
			got, err := FromRemoteInit(0, append(s.recvOpts[:len(s.recvOpts):len(s.recvOpts)], WithGroup(g), WithBroadcast(), testCtx(t))...)
			if s.err {
				require.Error(t, err, s.name)
			} else {
				require.NoError(t, err, s.name)
				checkBigTD(t, got, 1, s.m, base)
			}
		}
		assert.Equal(t, s.wantFirst, first(), "%s: the next first message's length", s.name)
	}
}

// ownGroup returns a group of every rank of the world (of at least 2),
// its own for the test, which starts with nothing learnt from earlier
// transfers, and frees it when the test ends.
func ownGroup(t *testing.T) *group.Group {
	t.Helper()
	world := mpitest.Need(t, 2)
	g, err := world.Split(0, world.Rank())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Free()) })
	return g
}

// TestNextFirst: the length of the next first message of broadcast mode.
func TestNextFirst(t *testing.T) {
	const prefixed = bcastPrefix // a frame's length is given without it
	for _, tc := range []struct {
		name     string
		first    int
		frameLen int
		oneNode  bool
		want     int
	}{
		{"small", bcastFirst, 100, true, bcastFirst},
		{"fits exactly", bcastFirst, bcastFirst - prefixed, false, bcastFirst},
		{"over, one node: in parts", bcastFirst, 6000, true, bcastFirst},
		{"over, between nodes: whole", bcastFirst, 6000, false, 6144},
		{"over twice, one node: whole", bcastFirst, 2 * bcastFirst, true, 8192},
		{"rounded up to 256 bytes", bcastFirst, 20000 - prefixed, true, 20224},
		{"fits and fills half: kept", 20224, 10112 - prefixed, true, 20224},
		{"fits, under half: shrinks", 20224, 10000 - prefixed, false, 10240},
		{"under half, in parts: shrinks to bcastFirst", 20224, 7000, true, bcastFirst},
		{"longer: grows", 20224, 30000, true, 30208},
		{"at the cap", bcastFirst, bcastFirstMax - prefixed, false, bcastFirstMax},
		{"over the cap: in parts", 20224, bcastFirstMax, false, bcastFirst},
		{"far over the cap", 20224, 1 << 40, true, bcastFirst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nextFirst(tc.first, uint64(tc.frameLen), tc.oneNode))
		})
	}
}
