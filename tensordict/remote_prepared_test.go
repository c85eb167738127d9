// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// TestInitRemotePrepared: after two InitRemotes in a row of one small
// structure and frame size, the receiver makes its result before the next
// frame arrives (preparedInit) and the frame lands in it; once one such
// frame passed every check, the next ones that repeat its header are
// taken without them (knownInit). Each result has memory of its own; a
// frame of the same size that does not fit the prepared result (garbage,
// another structure) is refused or built as any other, and the streak
// starts again after another structure; a lower limit, or a structure
// kept since, makes the checks run again.
func TestInitRemotePrepared(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	build := func(t *testing.T, round float64) *TensorDict { return countedTD(t, 100, round) }
	src := build(t, 0)
	// Described by its kept structure from the second send on, x's frame
	// is a bare header and the storage.
	n := wire.Size + src.cons.st.Len()
	// y: another structure whose first frame (with its metadata) is n
	// bytes too.
	y := frameOfSize(t, n)

	// What each receive of rank 1 gets, with which options, and the
	// prepared results it makes, uses after every check, and takes with
	// a known header.
	type step struct {
		name              string
		x                 float64 // the round of x sent, or -1
		y, garbage        bool
		opts              []RemoteOption
		err               error
		made, used, known int64
	}
	steps := []step{
		{name: "first, with its metadata", x: 0},
		{name: "second, described", x: 1},
		{name: "third, described", x: 2},
		{name: "fourth: prepared", x: 3, made: 1, used: 1},
		{name: "fifth: a known header", x: 4, made: 1, known: 1},
		{name: "garbage of the same size", x: -1, garbage: true, err: wire.ErrHeader, made: 1},
		{name: "x after garbage", x: 5, made: 1, known: 1},
		{name: "x over a lower limit", x: 6, opts: []RemoteOption{WithMaxBytes(16)}, err: wire.ErrLimit, made: 1},
		{name: "x within the limit again", x: 7, made: 1, known: 1},
		{name: "y of the same size", x: -1, y: true, made: 1},
		{name: "x after y", x: 8},
		{name: "x again", x: 9},
		{name: "x prepared again, y kept since", x: 10, made: 1, used: 1},
		{name: "x known again", x: 11, made: 1, known: 1},
	}
	if g.Rank() == 0 {
		for _, s := range steps {
			switch {
			case s.garbage:
				require.NoError(t, mpi.Send(g.LibComm(), bytes.Repeat([]byte{0xff}, n), 1, xfer.InitHeaderTag))
			case s.y:
				require.NoError(t, y.InitRemote(1))
			default:
				// The same TensorDict, refilled: sent from its state.
				for _, it := range build(t, s.x).Items(IncludeNested(), LeavesOnly()) {
					require.NoError(t, src.SetInPlace(it.Key, it.Tensor))
				}
				require.NoError(t, src.InitRemote(1))
			}
		}
		return
	}
	type result struct {
		td    *TensorDict
		round float64
	}
	var kept []result // x's results, checked again at the end
	for _, s := range steps {
		made, used, known := prepCounts.made.Load(), prepCounts.used.Load(), prepCounts.known.Load()
		got, err := FromRemoteInit(0, s.opts...)
		assert.Equal(t, s.made, prepCounts.made.Load()-made, "%s: prepared", s.name)
		assert.Equal(t, s.used, prepCounts.used.Load()-used, "%s: used", s.name)
		assert.Equal(t, s.known, prepCounts.known.Load()-known, "%s: known", s.name)
		if s.err != nil {
			require.ErrorIs(t, err, s.err, s.name)
			continue
		}
		require.NoError(t, err, s.name)
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
