// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// The tests of this file run a learner (rank 0) and actors (every other
// rank: three at np 4, one at np 2). Where an order matters, the learner
// lets one actor send at a time by passing it a token, a raw MPI message
// on the user's communicator, which the library never receives.

// tokenTag is the tag of the tokens on the user's communicator.
const tokenTag = 4242

// sendToken lets actor dst send.
func sendToken(t *testing.T, g *group.Group, dst int) {
	t.Helper()
	require.NoError(t, mpi.Send(g.Comm(), []byte{1}, dst, tokenTag))
}

// awaitToken waits, at most 30 s, for the learner's token.
func awaitToken(t *testing.T, g *group.Group) {
	t.Helper()
	var b [1]byte
	r, err := mpi.Irecv(g.Comm(), b[:], 0, tokenTag)
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, _, err := r.Test()
		require.NoError(t, err)
		if done {
			return
		}
		if time.Now().After(deadline) {
			assert.NoError(t, r.Cancel())
			_, _ = r.Wait()
			t.Fatalf("rank %d: no token from the learner within 30 s", g.Rank())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// actorOrder returns the actors in the order they send in round r: a
// rotation of the ranks, reversed in odd rounds, so that it is not the
// ranks' order.
func actorOrder(size, r int) []int {
	n := size - 1
	order := make([]int, n)
	for i := range order {
		order[i] = 1 + (i+r)%n
	}
	if r%2 == 1 {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			order[i], order[j] = order[j], order[i]
		}
	}
	return order
}

// actorTD returns leaves leaves of n float64 each, all equal to v.
func actorTD(t testing.TB, leaves, n int, v float64) *TensorDict {
	t.Helper()
	td := New()
	for i := range leaves {
		require.NoError(t, td.Set(K("obs", fmt.Sprintf("l%d", i)), tensor.Full(tensor.Float64, v, n)))
	}
	return td
}

// stamp is the value an actor's TensorDicts hold in a round.
func stamp(rank, round int) float64 { return float64(100*rank + round) }

// TestFromRemoteInitAnySource: the learner receives the actors'
// TensorDicts with FromRemoteInit(AnySource) in the order the token lets
// them send, Source naming each; then every actor sends at once, and each
// result is one actor's whole (its payload messages from that actor
// only, not mixed with another's). Inline and separate storages.
func TestFromRemoteInitAnySource(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, n := range []int{4, 1 << 17} { // inline; 1 MiB a leaf, apart
		const rounds = 3
		for r := range rounds {
			if g.Rank() != 0 {
				awaitToken(t, g)
				require.NoError(t, actorTD(t, 2, n, stamp(g.Rank(), r)).InitRemote(0, testCtx(t)))
				continue
			}
			for _, k := range actorOrder(g.Size(), r) {
				sendToken(t, g, k)
				td, err := FromRemoteInit(AnySource, testCtx(t))
				require.NoError(t, err)
				assert.Equal(t, k, td.Source(), "n %d round %d", n, r)
				assert.True(t, leavesAre(td, stamp(k, r)), "n %d round %d from %d", n, r, k)
			}
		}
		// All at once, once every actor has the token.
		if g.Rank() != 0 {
			awaitToken(t, g)
			require.NoError(t, actorTD(t, 2, n, stamp(g.Rank(), 50)).InitRemote(0, testCtx(t)))
			continue
		}
		for k := 1; k < g.Size(); k++ {
			sendToken(t, g, k)
		}
		seen := map[int]bool{}
		for range g.Size() - 1 {
			td, err := FromRemoteInit(AnySource, testCtx(t))
			require.NoError(t, err)
			src := td.Source()
			assert.False(t, seen[src], "rank %d twice", src)
			seen[src] = true
			assert.True(t, leavesAre(td, stamp(src, 50)), "n %d from %d", n, src)
		}
		assert.Len(t, seen, g.Size()-1)
	}
}

// TestRecvAnySource: Recv(AnySource) into one TensorDict, per leaf and
// consolidated, first in the token's order, then from every actor at
// once, several transfers each: every transfer arrives whole from one
// actor, and each actor's in the order it sent them.
func TestRecvAnySource(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, mode := range []struct {
		name string
		cons bool
	}{{"per leaf", false}, {"consolidated", true}} {
		for _, n := range []int{4, 1 << 16} {
			sendOpts := []SendOption{WithTag(10), testCtx(t)}
			recvOpts := []RecvOption{WithTag(10), testCtx(t)}
			if mode.cons {
				sendOpts = append(sendOpts, WithConsolidated())
				recvOpts = append(recvOpts, WithConsolidated())
			}
			td := actorTD(t, 3, n, 0)
			const rounds = 3
			if g.Rank() != 0 {
				// Each actor's own value: the learner's td takes the
				// values of the last sender.
				require.NoError(t, td.SetNonTensor(K("env"), fmt.Sprint("env", g.Rank())))
				for r := range rounds {
					awaitToken(t, g)
					fill(t, td, stamp(g.Rank(), r))
					require.NoError(t, td.Send(0, sendOpts...))
				}
				awaitToken(t, g) // every actor at once, from here on
				for r := range rounds {
					fill(t, td, stamp(g.Rank(), 10+r))
					require.NoError(t, td.Send(0, sendOpts...))
				}
				continue
			}
			for r := range rounds {
				for _, k := range actorOrder(g.Size(), r) {
					sendToken(t, g, k)
					_, err := td.Recv(AnySource, recvOpts...)
					require.NoError(t, err)
					assert.Equal(t, k, td.Source(), "%s n %d round %d", mode.name, n, r)
					assert.True(t, leavesAre(td, stamp(k, r)), "%s n %d round %d from %d", mode.name, n, r, k)
					env, err := td.GetNonTensor(K("env"))
					require.NoError(t, err)
					assert.Equal(t, fmt.Sprint("env", k), env, "%s n %d round %d", mode.name, n, r)
				}
			}
			for k := 1; k < g.Size(); k++ {
				sendToken(t, g, k)
			}
			next := map[int]int{}
			for range rounds * (g.Size() - 1) {
				_, err := td.Recv(AnySource, recvOpts...)
				require.NoError(t, err)
				src := td.Source()
				assert.True(t, leavesAre(td, stamp(src, 10+next[src])), "%s n %d: transfer %d from %d", mode.name, n, next[src], src)
				env, err := td.GetNonTensor(K("env"))
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprint("env", src), env, "%s n %d", mode.name, n)
				next[src]++
			}
			for k := 1; k < g.Size(); k++ {
				assert.Equal(t, rounds, next[k], "%s n %d: transfers from %d", mode.name, n, k)
			}
		}
	}
}

// TestWaitAnyIRecv: the learner keeps one IRecv per actor and takes them
// with WaitAny as they complete, in the token's order, over several
// rounds, posting a new IRecv in place of each completed one. Then the
// same with IRecvs from AnySource: the oldest pending one takes each
// transfer, whoever sends it.
func TestWaitAnyIRecv(t *testing.T) {
	g := mpitest.Need(t, 2)
	const rounds = 4
	actors := g.Size() - 1
	opts := []RecvOption{WithConsolidated(), WithTag(20), testCtx(t)}
	if g.Rank() != 0 {
		td := actorTD(t, 2, 8, 0)
		for r := range 2 * rounds {
			awaitToken(t, g)
			fill(t, td, stamp(g.Rank(), r))
			require.NoError(t, td.Send(0, WithConsolidated(), WithTag(20), testCtx(t)))
		}
		return
	}
	tds := make([]*TensorDict, actors)
	ps := make([]*Pending, actors)
	for i := range ps {
		tds[i] = actorTD(t, 2, 8, -1)
		var err error
		ps[i], err = tds[i].IRecv(i+1, opts...)
		require.NoError(t, err)
	}
	for r := range rounds {
		for _, k := range actorOrder(g.Size(), r) {
			sendToken(t, g, k)
			i, err := WaitAny(ps)
			require.NoError(t, err)
			require.Equal(t, k-1, i, "round %d: the IRecv from %d completed first", r)
			assert.Equal(t, k, ps[i].Source())
			assert.Equal(t, k, tds[i].Source())
			assert.True(t, tds[i].EqScalar(stamp(k, r)).All(), "round %d from %d", r, k)
			require.NoError(t, ps[i].Wait(), "complete: Wait returns at once")
			if r < rounds-1 {
				ps[i], err = tds[i].IRecv(k, opts...)
				require.NoError(t, err)
			}
		}
	}
	i, err := WaitAny(ps)
	assert.Equal(t, -1, i, "every entry was taken")
	assert.NoError(t, err)

	// From AnySource: the IRecv posted first takes the first transfer.
	posted := make([]int, actors) // when each was posted
	for i := range ps {
		var err error
		ps[i], err = tds[i].IRecv(AnySource, opts...)
		require.NoError(t, err)
		posted[i] = i
	}
	seq := actors
	for r := range rounds {
		for _, k := range actorOrder(g.Size(), r) {
			sendToken(t, g, k)
			i, err := WaitAny(ps)
			require.NoError(t, err)
			oldest := 0
			for j := range posted {
				if posted[j] < posted[oldest] {
					oldest = j
				}
			}
			assert.Equal(t, oldest, i, "round %d: the oldest IRecv takes the transfer of %d", r, k)
			assert.Equal(t, k, ps[i].Source())
			assert.True(t, tds[i].EqScalar(stamp(k, rounds+r)).All(), "round %d from %d", r, k)
			ps[i], err = tds[i].IRecv(AnySource, opts...)
			require.NoError(t, err)
			posted[i], seq = seq, seq+1
		}
	}
	for _, p := range ps {
		require.NoError(t, p.Cancel())
		assert.Error(t, p.Wait())
		assert.Equal(t, -1, p.Source())
	}
	assert.Zero(t, xfer.Pending())
}

// TestWaitAnyInactive: nil entries and Pendings already reported are
// skipped; with none active WaitAny returns -1 at once.
func TestWaitAnyInactive(t *testing.T) {
	g := mpitest.Need(t, 2)
	i, err := WaitAny(nil)
	assert.Equal(t, -1, i)
	assert.NoError(t, err)
	i, err = WaitAny([]*Pending{nil, nil})
	assert.Equal(t, -1, i)
	assert.NoError(t, err)
	i, err = WaitAny([]*Pending{nil, {}})
	assert.Equal(t, 1, i, "a zero Pending completes with an error")
	assert.Error(t, err)
	if g.Rank() > 1 {
		return
	}
	td := actorTD(t, 1, 4, float64(g.Rank()))
	if g.Rank() == 1 {
		p, err := td.ISend(0, WithTag(30), testCtx(t))
		require.NoError(t, err)
		i, err := WaitAny([]*Pending{nil, p})
		assert.Equal(t, 1, i)
		assert.NoError(t, err)
		assert.Equal(t, -1, p.Source(), "an ISend has no source")
		return
	}
	p, err := td.IRecv(1, WithTag(30), testCtx(t))
	require.NoError(t, err)
	ps := []*Pending{nil, p}
	i, err = WaitAny(ps)
	assert.Equal(t, 1, i)
	assert.NoError(t, err)
	assert.Equal(t, 1, p.Source())
	assert.True(t, td.EqScalar(1).All())
	i, err = WaitAny(ps)
	assert.Equal(t, -1, i, "a Pending WaitAny returned is inactive")
	assert.NoError(t, err)
}

// TestAnySourceOrderWithIRecv: an IRecv from AnySource takes its transfer
// before a Recv from one rank called after it on the same tag, and an
// IRecv from one rank before a Recv from AnySource called after it.
func TestAnySourceOrderWithIRecv(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td := actorTD(t, 2, 4, 0)
	if g.Rank() == 1 {
		for v := range 4 {
			fill(t, td, float64(v))
			require.NoError(t, td.Send(0, WithTag(40), testCtx(t)))
		}
		return
	}
	first, second := actorTD(t, 2, 4, -1), actorTD(t, 2, 4, -1)
	p, err := first.IRecv(AnySource, WithTag(40), testCtx(t))
	require.NoError(t, err)
	_, err = second.Recv(1, WithTag(40), testCtx(t))
	require.NoError(t, err)
	require.NoError(t, p.Wait())
	assert.True(t, first.EqScalar(0).All(), "the IRecv from AnySource came first")
	assert.True(t, second.EqScalar(1).All())

	p, err = first.IRecv(1, WithTag(40), testCtx(t))
	require.NoError(t, err)
	_, err = second.Recv(AnySource, WithTag(40), testCtx(t))
	require.NoError(t, err)
	require.NoError(t, p.Wait())
	assert.True(t, first.EqScalar(2).All(), "the IRecv from rank 1 came first")
	assert.True(t, second.EqScalar(3).All())
	assert.Equal(t, 1, second.Source())
}

// TestAnySourceRefused: AnySource is point to point and for receiving.
func TestAnySourceRefused(t *testing.T) {
	mpitest.Need(t, 1)
	td := actorTD(t, 1, 4, 0)
	for name, err := range map[string]error{
		"broadcast":  func() error { _, err := FromRemoteInit(AnySource, WithBroadcast()); return err }(),
		"torch":      func() error { _, err := FromRemoteInit(AnySource, WithTorch()); return err }(),
		"InitRemote": td.InitRemote(AnySource),
		"Send":       td.Send(AnySource),
		"ISend":      func() error { _, err := td.ISend(AnySource); return err }(),
	} {
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "AnySource", name)
	}
	assert.Equal(t, -1, td.Source(), "built here")
	assert.Equal(t, -1, (*Pending)(nil).Source())
}

// TestAnySourceContext: a receive from AnySource that nobody sends to
// ends with its context, holding nothing after.
func TestAnySourceContext(t *testing.T) {
	mpitest.Need(t, 1)
	timeout := func() CommOption {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return WithContext(ctx)
	}
	td := actorTD(t, 1, 4, 0)
	_, err := FromRemoteInit(AnySource, timeout())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = td.Recv(AnySource, WithTag(50), timeout())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "any rank")
	p, err := td.IRecv(AnySource, WithTag(50), timeout())
	require.NoError(t, err)
	assert.ErrorIs(t, p.Wait(), context.DeadlineExceeded)
	assert.Equal(t, -1, p.Source())
	assert.Equal(t, -1, td.Source())
	noTransferState(t)
}
