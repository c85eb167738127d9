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

// TestBroadcastModeSizes: broadcast-mode InitRemotes of one root whose
// frames are whole in the first message or longer than it, with their
// storage inline or apart, between one that a receiver refused and one
// that the root gave up: each arrives, or fails on every rank, and the
// next one works.
func TestBroadcastModeSizes(t *testing.T) {
	g := ownGroup(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	const (
		small   = 8                  // 64 bytes
		mid     = 2048               // 16 KiB
		midLess = 1500               // 12 KiB
		large   = wire.InlineMax / 8 // 64 KiB
		apart   = 2 * wire.InlineMax / 8
	)
	steps := []struct {
		name     string
		m        int // float64 elements of the one leaf
		recvOpts []RemoteOption
		rootOpts []RemoteOption
		err      bool
	}{
		{name: "small", m: small},
		{name: "16 KiB", m: mid},
		{name: "16 KiB again", m: mid},
		{name: "12 KiB", m: midLess},
		{name: "small again", m: small},
		{name: "64 KiB refused", m: large, recvOpts: []RemoteOption{WithMaxBytes(20000)}, err: true},
		{name: "16 KiB after the refusal", m: mid},
		{name: "64 KiB given up by the root", m: large, rootOpts: []RemoteOption{WithContext(cancelled)}, err: true},
		{name: "16 KiB after the root gave up", m: mid},
		{name: "128 KiB", m: apart},
		{name: "64 KiB", m: large},
		{name: "small, refused", m: small, recvOpts: []RemoteOption{WithMaxBytes(16)}, err: true},
		{name: "small after the refusal", m: small},
	}
	for i, s := range steps {
		base := float64(i)
		if g.Rank() == 0 {
			err := bigTD(t, 1, s.m, base).InitRemote(0, append(s.rootOpts[:len(s.rootOpts):len(s.rootOpts)], WithGroup(g), WithBroadcast())...)
			if s.err {
				require.Error(t, err, s.name)
			} else {
				require.NoError(t, err, s.name)
			}
			continue
		}
		got, err := FromRemoteInit(0, append(s.recvOpts[:len(s.recvOpts):len(s.recvOpts)], WithGroup(g), WithBroadcast(), testCtx(t))...)
		if s.err {
			require.Error(t, err, s.name)
		} else {
			require.NoError(t, err, s.name)
			checkBigTD(t, got, 1, s.m, base)
		}
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
