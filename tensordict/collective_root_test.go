// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// rootTD returns a TensorDict of rows rows (16 bytes each) whose leaves
// hold v.
func rootTD(t testing.TB, rows int, v float64) *TensorDict {
	t.Helper()
	td := New(rows)
	require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, v, rows, 2)))
	require.NoError(t, td.Set(K("n", "y"), tensor.Full(tensor.Int64, v, rows)))
	return td
}

// checkRootTD fails unless td is rootTD(rows, v).
func checkRootTD(t testing.TB, td *TensorDict, rows int, v float64) {
	t.Helper()
	require.NotNil(t, td)
	assert.Equal(t, []int{rows}, td.BatchSize())
	for _, k := range []Key{K("x"), K("n", "y")} {
		x, err := td.Get(k)
		require.NoError(t, err)
		collRequireAll(t, x, v, k.String())
	}
}

// TestCollectiveRootsDiffer: ranks that pass different roots to
// Broadcast, IBroadcast, Scatter, GatherAndStack or broadcast-mode
// InitRemote and FromRemoteInit all get an error wrapping ErrMismatch that
// names the lowest and the highest root, small or 4 MiB, with or without
// a context, and none of the call's messages stays queued: a Broadcast
// (or broadcast-mode InitRemote) with agreed roots right after it moves
// the right values. Before the roots were compared, Broadcast returned
// nil with different data on each rank, or hung.
func TestCollectiveRootsDiffer(t *testing.T) {
	g := mpitest.Need(t, 2)
	me, n := g.Rank(), g.Size()
	ctx := func(t *testing.T) CollectiveOption { return WithContext(mpitest.Ctx(t, 20*time.Second)) }
	calls := []struct {
		name, what string // what: how the error names a root
		run        func(t *testing.T, td *TensorDict, root int) error
	}{
		{"Broadcast with a context", "src ", func(t *testing.T, td *TensorDict, root int) error {
			_, err := td.Broadcast(root, ctx(t))
			return err
		}},
		{"Broadcast", "src ", func(t *testing.T, td *TensorDict, root int) error {
			_, err := td.Broadcast(root)
			return err
		}},
		{"IBroadcast", "src ", func(t *testing.T, td *TensorDict, root int) error {
			_, p, err := td.IBroadcast(root, ctx(t))
			if err == nil {
				err = p.Wait()
			}
			return err
		}},
		{"InitRemote", "src ", func(t *testing.T, td *TensorDict, root int) error {
			c := WithContext(mpitest.Ctx(t, 20*time.Second))
			if root == me {
				return td.InitRemote(0, WithBroadcast(), c)
			}
			_, err := FromRemoteInit(root, WithBroadcast(), c)
			return err
		}},
		{"Scatter", "src ", func(t *testing.T, td *TensorDict, root int) error {
			var tds []*TensorDict
			if root == me {
				tds = slices.Repeat([]*TensorDict{td}, n)
			}
			_, err := td.Scatter(root, tds, ctx(t))
			return err
		}},
		{"GatherAndStack", "dst ", func(t *testing.T, td *TensorDict, root int) error {
			_, err := td.GatherAndStack(root, ctx(t))
			return err
		}},
	}
	rootings := []struct {
		name string
		root func(rank int) int
	}{
		{"each its own", func(rank int) int { return rank }},
		{"the last differs", func(rank int) int {
			if rank == n-1 {
				return n - 1
			}
			return 0
		}},
	}
	for _, c := range calls {
		for _, rt := range rootings {
			for _, rows := range []int{2, 4 << 20 / 16} {
				mpitest.Run(t, fmt.Sprintf("%s/%s/%d bytes", c.name, rt.name, 16*rows), func(t *testing.T) {
					err := c.run(t, rootTD(t, rows, float64(me+1)), rt.root(me))
					require.Error(t, err)
					assert.ErrorIs(t, err, ErrMismatch)
					assert.ErrorContains(t, err, fmt.Sprintf("different roots (%s%d and %d", c.what, rt.root(0), rt.root(n-1)))

					// Nothing of the call is left: the next one with
					// agreed roots moves the source's values.
					src := rootTD(t, rows, float64(10+n-1))
					if c.name == "InitRemote" {
						var got *TensorDict
						if me == n-1 {
							require.NoError(t, src.InitRemote(0, WithBroadcast(), testCtx(t)))
							got = src
						} else {
							got, err = FromRemoteInit(n-1, WithBroadcast(), testCtx(t))
							require.NoError(t, err)
						}
						checkRootTD(t, got, rows, float64(10+n-1))
						return
					}
					got, err := src.Broadcast(n-1, ctx(t))
					require.NoError(t, err)
					checkRootTD(t, got, rows, float64(10+n-1))
				})
			}
		}
	}
}

// TestCollectiveRootInRange: a root out of the group's range on some ranks
// only fails on every rank (a mismatch for Broadcast, the failing rank's
// error for Reduce and IReduce), not on those ranks alone while the
// others wait for them; the same root out of range on every rank is
// reported as such on every rank. The group works after.
func TestCollectiveRootInRange(t *testing.T) {
	g := mpitest.Need(t, 2)
	me, n := g.Rank(), g.Size()
	c := WithContext(mpitest.Ctx(t, 20*time.Second))
	root := 0
	if me == n-1 {
		root = n
	}
	_, err := New().Broadcast(root, c)
	require.ErrorIs(t, err, ErrMismatch)
	assert.ErrorContains(t, err, fmt.Sprintf("different roots (src 0 and %d", n))
	_, err = New().Broadcast(-1, c)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrMismatch)
	assert.ErrorContains(t, err, "src -1 is out of range")

	for _, async := range []bool{false, true} {
		td := rootTD(t, 2, 1)
		if async {
			var p *Pending
			if p, err = td.IReduce(root, ReduceSum, c); err == nil {
				err = p.Wait()
			}
		} else {
			err = td.Reduce(root, ReduceSum, c)
		}
		require.Error(t, err, "async %v", async)
		if me == n-1 {
			assert.ErrorContains(t, err, fmt.Sprintf("dst %d is out of range", n))
		} else {
			var pe *PeerError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, n-1, pe.Rank)
		}
		checkRootTD(t, td, 2, 1) // nothing was reduced
	}
	td := rootTD(t, 2, 1)
	require.NoError(t, td.Reduce(0, ReduceSum, c))
	if me == 0 {
		checkRootTD(t, td, 2, float64(n))
	}
}

// TestBroadcastModeRootReceives: a root that calls FromRemoteInit in
// broadcast mode, which nobody sends to, makes every rank return an
// error, instead of leaving the other receivers waiting for a broadcast
// that never comes: its own, and on the others a *PeerError naming it.
func TestBroadcastModeRootReceives(t *testing.T) {
	g := mpitest.Need(t, 2)
	_, err := FromRemoteInit(0, WithBroadcast(), testCtx(t))
	require.Error(t, err)
	assert.ErrorContains(t, err, "calls InitRemote, not FromRemoteInit")
	if g.Rank() != 0 {
		var pe *PeerError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 0, pe.Rank)
	}
	// The group still works.
	src := rootTD(t, 2, 5)
	if g.Rank() == 0 {
		require.NoError(t, src.InitRemote(0, WithBroadcast(), testCtx(t)))
		return
	}
	got, err := FromRemoteInit(0, WithBroadcast(), testCtx(t))
	require.NoError(t, err)
	checkRootTD(t, got, 2, 5)
}
