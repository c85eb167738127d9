// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// ring returns the ranks this rank receives from and sends to in a ring
// over every rank of the world.
func ring(rank, size int) (prev, next int) {
	return (rank + size - 1) % size, (rank + 1) % size
}

// goroutineSlack is how many goroutines above the start a test accepts
// once its work has ended: the runtime starts some of its own helpers
// lazily on first use (the goroutine running cleanups and finalizers, a
// timer's), which stay and are not the library's.
const goroutineSlack = 2

// settle waits, up to half of mpitest.AgreeTimeout, until no IRecv is
// queued and the goroutines are back to start (within goroutineSlack),
// and reports the count. Long for -race on a loaded machine, and short
// enough that a rank that does not settle fails the test with its log
// before the other ranks give up waiting for its verdict.
func settle(start int) int {
	deadline := time.Now().Add(mpitest.AgreeTimeout / 2)
	for {
		n := runtime.NumGoroutine()
		if (xfer.Pending() == 0 && n <= start+goroutineSlack) || time.Now().After(deadline) {
			return n
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// noTransferState checks that no IRecv is queued, no tag lock is held and
// MPI has nothing in progress, so that group.Finalize would not refuse.
func noTransferState(t *testing.T) {
	t.Helper()
	assert.Zero(t, xfer.Pending(), "IRecvs still queued")
	held, _, _ := xfer.TagLocksInUse(group.World())
	assert.Zero(t, held, "tag locks still held")
	assert.NoError(t, mpi.Busy())
}

// TestIRecvCancelledContextsLeaveNothing: 10,000 IRecvs whose contexts are
// cancelled before anything is sent end without Wait, leave no goroutine,
// lock or queue entry behind, and the next transfer on the same tag is
// received intact.
func TestIRecvCancelledContextsLeaveNothing(t *testing.T) {
	g := mpitest.Need(t, 2)
	prev, next := ring(g.Rank(), g.Size())
	const n, tag = 10000, 901
	td := New()
	require.NoError(t, td.Set(K("x"), tensor.Zeros(tensor.Int32, 4)))

	runtime.GC()
	start := runtime.NumGoroutine()
	ps := make([]*Pending, n)
	cancels := make([]context.CancelFunc, n)
	for i := range ps {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := td.IRecv(prev, WithTag(tag), WithContext(ctx))
		require.NoError(t, err)
		ps[i], cancels[i] = p, cancel
	}
	// Pending, they hold no goroutine and no MPI call or request.
	assert.LessOrEqual(t, runtime.NumGoroutine(), start+goroutineSlack, "goroutines with %d IRecvs pending (start %d)", n, start)
	assert.NoError(t, mpi.Busy())
	done, err := ps[n-1].Test()
	assert.False(t, done)
	assert.NoError(t, err)
	for _, cancel := range cancels {
		cancel()
	}
	got := settle(start)
	assert.LessOrEqual(t, got, start+goroutineSlack, "goroutines after %d cancelled IRecvs (start %d)", n, start)
	noTransferState(t)
	// Checked without returning early: the other ranks meet this one in
	// the barrier below, and the failure is reported only once they all
	// agree on the verdict.
	for i, p := range ps {
		done, err := p.Test()
		if !assert.True(t, done, "IRecv %d of %d is still pending (Pending() %d)", i, n, xfer.Pending()) ||
			!assert.ErrorIs(t, err, context.Canceled, "IRecv %d", i) {
			break
		}
		assert.ErrorIs(t, p.Wait(), context.Canceled)
	}
	if done, _ := ps[0].Test(); done {
		assert.Contains(t, ps[0].Wait().Error(), "IRecv: rank")
		assert.Contains(t, ps[0].Wait().Error(), "waiting for the header")
	}

	// The tag is free: a real transfer on it arrives.
	require.NoError(t, g.Barrier()) // every rank's IRecvs have ended
	out := New()
	require.NoError(t, out.Set(K("x"), tensor.Full(tensor.Int32, float64(g.Rank()), 4)))
	sp, err := out.ISend(next, WithTag(tag))
	require.NoError(t, err)
	rp, err := td.IRecv(prev, WithTag(tag), testCtx(t))
	require.NoError(t, err)
	require.NoError(t, rp.Wait())
	require.NoError(t, sp.Wait())
	assert.True(t, td.EqScalar(float64(prev)).All())
	noTransferState(t)
}

// TestIRecvCancel: an IRecv nothing is sent to holds no MPI call or
// request, so Finalize would not refuse even before Cancel; Cancel ends a
// Wait blocked on another goroutine, which returns an error wrapping
// context.Canceled, and leaves nothing behind. An ISend cannot be
// cancelled.
func TestIRecvCancel(t *testing.T) {
	g := mpitest.Need(t, 2)
	prev, next := ring(g.Rank(), g.Size())
	const tag = 902
	td := p2pTD(t)
	p, err := td.IRecv(prev, WithTag(tag)) // no context: only Cancel ends it
	require.NoError(t, err)
	done, err := p.Test()
	assert.False(t, done)
	assert.NoError(t, err)
	assert.NoError(t, mpi.Busy())

	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	time.Sleep(20 * time.Millisecond) // let Wait start polling
	require.NoError(t, p.Cancel())
	select {
	case err := <-waited:
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "Pending.Cancel")
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after Cancel")
	}
	require.NoError(t, p.Cancel(), "a second Cancel")
	done, err = p.Test()
	assert.True(t, done)
	assert.ErrorIs(t, err, context.Canceled)
	noTransferState(t)

	// Cancel before any Wait, and on an ISend.
	p, err = td.IRecv(prev, WithTag(tag))
	require.NoError(t, err)
	require.NoError(t, p.Cancel())
	require.ErrorIs(t, p.Wait(), context.Canceled)
	require.NoError(t, g.Barrier()) // every rank's IRecvs have ended
	sp, err := td.ISend(next, WithTag(tag))
	require.NoError(t, err)
	assert.Error(t, sp.Cancel())
	// The send above is received by a Recv on the same tag: the cancelled
	// IRecvs took nothing.
	_, err = td.Recv(prev, WithTag(tag), testCtx(t))
	require.NoError(t, err)
	require.NoError(t, sp.Wait())
	noTransferState(t)

	var zero *Pending
	assert.Error(t, zero.Cancel())
	assert.Error(t, (&Pending{}).Cancel())
}

// TestIRecvEqualsRecv: IRecv then Wait gives what Recv gives, data, tag
// and error, per leaf, with pseudo-random tags, consolidated inline and
// consolidated in chunks, over leaves beyond the eager limit.
func TestIRecvEqualsRecv(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, tc := range []struct {
		name string
		opts []any
		big  bool
	}{
		{"per leaf", []any{WithTag(3)}, false},
		{"per leaf big", nil, true},
		{"pseudo-random tags", []any{WithPseudoRandTags(), WithTag(11)}, false},
		{"consolidated inline", []any{WithConsolidated(), WithTag(4)}, false},
		{"consolidated big", []any{WithConsolidated()}, true},
	} {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			if g.Rank() > 1 {
				return
			}
			mk := func(v float64) *TensorDict {
				if tc.big {
					return bigTD(t, 3, 1<<17, v) // 1 MiB leaves
				}
				td := p2pTD(t)
				fill(t, td, v)
				return td
			}
			is := func(td *TensorDict, v float64) bool {
				return td.SubInPlace(mk(v)) == nil && td.EqScalar(0).All()
			}
			if g.Rank() == 0 {
				for _, v := range []float64{1, 2, 3, 4, 5} {
					require.NoError(t, mk(v).Send(1, mpitest.As[SendOption](tc.opts)...))
				}
				return
			}
			opts := mpitest.As[RecvOption](append(tc.opts, testCtx(t)))
			byRecv, byIRecv := mk(0), mk(0)
			tag, err := byRecv.Recv(0, opts...)
			require.NoError(t, err)
			p, err := byIRecv.IRecv(0, opts...)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			assert.Equal(t, tag, p.Tag())
			assert.True(t, is(byRecv, 1))
			assert.True(t, is(byIRecv, 2), "IRecv got the second transfer")

			// Polled with Test only, after the sender has gone on.
			p, err = byIRecv.IRecv(0, opts...)
			require.NoError(t, err)
			deadline := time.Now().Add(30 * time.Second)
			for {
				done, err := p.Test()
				require.NoError(t, err)
				if done || time.Now().After(deadline) {
					require.True(t, done, "Test never completed")
					break
				}
			}
			assert.True(t, is(byIRecv, 3))

			// Into a TensorDict of another structure: the same error as Recv.
			wrong := New()
			require.NoError(t, wrong.Set(K("other"), tensor.Zeros(tensor.Float64, 2)))
			p, err = wrong.IRecv(0, opts...)
			require.NoError(t, err)
			ierr := p.Wait()
			require.ErrorIs(t, ierr, ErrMismatch)
			_, rerr := wrong.Recv(0, opts...)
			require.ErrorIs(t, rerr, ErrMismatch)
			assert.Equal(t, rerr.Error(), strings.Replace(ierr.Error(), "IRecv:", "Recv:", 1))
		})
	}
}

// TestIRecvOrder: IRecvs from one source on one tag take the transfers in
// the order they were called, whatever the order of their Waits, and a
// Recv called after them takes the transfer after theirs.
func TestIRecvOrder(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	const tag = 903
	mk := func(v float64) *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("v"), tensor.Full(tensor.Float32, v, 2)))
		return td
	}
	if g.Rank() == 0 {
		for v := range 4 {
			require.NoError(t, mk(float64(v)).Send(1, WithTag(tag)))
		}
		return
	}
	tds := []*TensorDict{mk(-1), mk(-1), mk(-1), mk(-1)}
	var ps []*Pending
	for _, td := range tds[:3] {
		p, err := td.IRecv(0, WithTag(tag), testCtx(t))
		require.NoError(t, err)
		ps = append(ps, p)
	}
	require.NoError(t, ps[2].Wait(), "the last IRecv, waited first")
	_, err := tds[3].Recv(0, WithTag(tag), testCtx(t))
	require.NoError(t, err)
	require.NoError(t, ps[0].Wait())
	require.NoError(t, ps[1].Wait())
	for v, td := range tds {
		assert.True(t, td.EqScalar(float64(v)).All(), "transfer %d", v)
	}
	noTransferState(t)
}

// TestIRecvDroppedPending: an IRecv whose Pending is dropped without Wait
// does not crash at garbage collection; when nothing comes for it within
// xfer.DrainIdle, it ends having received nothing, and the transfer sent
// after that goes to the next receive.
func TestIRecvDroppedPending(t *testing.T) {
	g := mpitest.Need(t, 2)
	const tag = 904
	for _, opts := range [][]any{{WithTag(tag)}, {WithTag(tag), WithConsolidated()}} {
		td := bigTD(t, 2, 1<<17, 0)
		if g.Rank() > 1 {
			require.NoError(t, g.Barrier()) // the world's barrier below
			continue
		}
		if g.Rank() == 0 {
			require.NoError(t, g.Barrier())
			fill(t, td, 6)
			require.NoError(t, td.Send(1, mpitest.As[SendOption](opts)...))
			continue
		}
		start := runtime.NumGoroutine()
		for range 100 {
			_, err := td.IRecv(0, mpitest.As[RecvOption](opts)...)
			require.NoError(t, err)
		}
		for range 3 {
			runtime.GC()
		}
		settle(start)
		noTransferState(t)
		require.NoError(t, g.Barrier())
		_, err := td.Recv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
		require.NoError(t, err)
		assert.True(t, td.EqScalar(6).All())
	}
}

// TestIRecvProceedsWhileOthersWait: an IRecv of a transfer too large for
// MPI to buffer, called before a receive of the sender's next transfer,
// proceeds while that receive waits, as if in the background: otherwise
// the sender, blocked in the IRecv's message, never sends the next one.
func TestIRecvProceedsWhileOthersWait(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, then := range []string{"Recv", "IRecv"} {
		mpitest.Run(t, then, func(t *testing.T) {
			if g.Rank() > 1 {
				return
			}
			big := bigTD(t, 2, 1<<18, 0) // 2 MiB leaves
			small := New()
			require.NoError(t, small.Set(K("s"), tensor.Zeros(tensor.Int64, 2)))
			if g.Rank() == 0 {
				fill(t, big, 8)
				fill(t, small, 9)
				require.NoError(t, big.Send(1, WithTag(905)))
				require.NoError(t, small.Send(1, WithTag(906)))
				return
			}
			pb, err := big.IRecv(0, WithTag(905), testCtx(t))
			require.NoError(t, err)
			ctx := WithContext(mpitest.Ctx(t, 10*time.Second))
			if then == "Recv" {
				_, err = small.Recv(0, WithTag(906), ctx)
			} else {
				var ps *Pending
				if ps, err = small.IRecv(0, WithTag(906), ctx); err == nil {
					err = ps.Wait()
				}
			}
			assert.NoError(t, err, "the later transfer, while the IRecv was not waited for")
			require.NoError(t, pb.Wait()) // also unblocks the sender if the above failed
			assert.True(t, big.EqScalar(8).All())
			assert.True(t, small.EqScalar(9).All())
			noTransferState(t)
		})
	}
}

// irecvStarted reports whether p's IRecv has received its header and
// holds its locks.
func irecvStarted(p *Pending) bool {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	return p.r.started
}

// sendPaused sends td to dst as td.Send(dst, WithTag(tag)) does, one
// blocking MPI_Send per message, and calls pause before message n (the
// header message is message 0, then one per leaf).
func sendPaused(t *testing.T, td *TensorDict, dst, tag, n int, pause func()) {
	t.Helper()
	lv, err := newLink("Send", dst, "to", resolve([]SendOption{WithTag(tag)}, usesSend))
	require.NoError(t, err)
	l := &lv
	s, err := lockState(l, td)
	require.NoError(t, err)
	defer s.mu.Unlock()
	require.NoError(t, s.prepare(l))
	msgs, tags, _, err := s.messages(l, false, false)
	require.NoError(t, err)
	require.Greater(t, len(msgs), n)
	for i, m := range msgs {
		if i == n {
			pause()
		}
		require.NoError(t, mpi.Send(l.Comm, m, l.Peer, tags[i]), "message %d", i)
	}
	clear(msgs)
}

// TestIRecvCancelAfterHeader: Cancel on an IRecv whose transfer has begun
// (the header and part of a large per-leaf payload received) discards the
// rest of the transfer, so that the sender returns and the next transfer
// on the same tags arrives intact. The sender stops after the header and
// half the leaves until the receiver's Test has returned, so that every
// round cancels a transfer in progress whatever the transport's timing.
func TestIRecvCancelAfterHeader(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	const rounds, tag, goTag, leaves = 5, 907, 908, 8
	big := bigTD(t, leaves, 1<<18, 0) // 2 MiB leaves, beyond any eager limit
	small := New()
	require.NoError(t, small.Set(K("s"), tensor.Zeros(tensor.Int64, 3)))
	if g.Rank() == 0 {
		for r := range rounds {
			fill(t, small, float64(r))
			sendPaused(t, big, 1, tag, 1+leaves/2, func() {
				var b [1]byte
				_, err := mpi.Recv(proto.LibComm(g), b[:], 1, goTag)
				require.NoError(t, err, "round %d: the receiver's go-ahead", r)
			})
			require.NoError(t, small.Send(1, WithTag(tag)))
		}
		return
	}
	for r := range rounds {
		p, err := big.IRecv(0, WithTag(tag), testCtx(t))
		require.NoError(t, err)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, _, err := mpi.Iprobe(proto.LibComm(g), 0, tag)
			require.NoError(t, err)
			if ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		done, err := p.Test() // takes the header and the leaves sent before the pause
		require.NoError(t, err)
		require.False(t, done, "round %d: the sender is paused before the last %d leaves", r, leaves/2)
		require.True(t, irecvStarted(p), "round %d: the header had arrived", r)
		require.NoError(t, mpi.Send(proto.LibComm(g), []byte{1}, 0, goTag))
		require.NoError(t, p.Cancel())
		err = p.Wait()
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "after the header: cancelled by Pending.Cancel")
		_, err = small.Recv(0, WithTag(tag), testCtx(t))
		require.NoError(t, err, "round %d: the transfer after the cancelled one", r)
		assert.True(t, small.EqScalar(float64(r)).All())
	}
	noTransferState(t)
}
