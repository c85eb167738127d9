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

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
)

// sendModes are the ways a TensorDict leaves a rank, each with the receive
// that pairs with it. send and recv move td, which both sides built with
// bigTD; the receiver's td is refilled by the receive.
var sendModes = []struct {
	name string
	send func(td *TensorDict, dst int, ctx context.Context) error
	recv func(t *testing.T, like *TensorDict, src int) *TensorDict
}{
	{"Send per leaf", func(td *TensorDict, dst int, ctx context.Context) error {
		return td.Send(dst, WithContext(ctx), WithTag(40))
	}, func(t *testing.T, like *TensorDict, src int) *TensorDict {
		_, err := like.Recv(src, WithTag(40), testCtx(t))
		require.NoError(t, err)
		return like
	}},
	{"Send consolidated", func(td *TensorDict, dst int, ctx context.Context) error {
		return td.Send(dst, WithContext(ctx), WithTag(50), WithConsolidated())
	}, func(t *testing.T, like *TensorDict, src int) *TensorDict {
		_, err := like.Recv(src, WithTag(50), WithConsolidated(), testCtx(t))
		require.NoError(t, err)
		return like
	}},
	{"ISend", func(td *TensorDict, dst int, ctx context.Context) error {
		p, err := td.ISend(dst, WithContext(ctx), WithTag(60))
		if err != nil {
			return err
		}
		err = p.Wait()
		if done, terr := p.Test(); !done || terr != err {
			return fmt.Errorf("Test after Wait gives %v, %v; Wait gave %w", done, terr, err)
		}
		return err
	}, func(t *testing.T, like *TensorDict, src int) *TensorDict {
		_, err := like.Recv(src, WithTag(60), testCtx(t))
		require.NoError(t, err)
		return like
	}},
	{"InitRemote", func(td *TensorDict, dst int, ctx context.Context) error {
		return td.InitRemote(dst, WithContext(ctx))
	}, func(t *testing.T, _ *TensorDict, src int) *TensorDict {
		got, err := FromRemoteInit(src, testCtx(t))
		require.NoError(t, err)
		return got
	}},
}

// TestSendEndedContextSendsNothing is issue 12 item 9: a send whose
// context has already ended returns its error and posts nothing, so the
// receiver's next receive takes the transfer after it. Every rank sends
// to the next one in a ring.
func TestSendEndedContextSendsNothing(t *testing.T) {
	g := mpitest.Need(t, 2)
	prev, next := ring(g.Rank(), g.Size())
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, size := range []int{4, 1 << 20} { // inline and separate payload
		for _, m := range sendModes {
			mpitest.Run(t, m.name, func(t *testing.T) {
				td := bigTD(t, 2, size, 7)
				before := mpix.InFlight()
				err := m.send(td, next, ended)
				require.ErrorIs(t, err, context.Canceled)
				assert.Contains(t, err.Error(), "nothing sent")
				assert.Equal(t, before, mpix.InFlight(), "nothing posted")

				fill(t, td, 3)
				sent := make(chan error, 1)
				go func() { sent <- m.send(td, next, mpitest.Ctx(t, 30*time.Second)) }()
				got := m.recv(t, bigTD(t, 2, size, 0), prev)
				require.NoError(t, <-sent)
				assert.True(t, got.EqScalar(3).All(), "the first transfer received is the one sent after")
			})
		}
	}
}

// TestSendGivenUpAtDeadline is issue 12 item 9: a 16 MiB transfer to a
// rank that does not receive returns at its deadline with an error
// wrapping context.DeadlineExceeded, leaving its sends to package mpi.
// When the receiver does receive, later, it takes that transfer whole
// and as it was at the send, then the next transfer on the same tags:
// the two never mix, although the sender reuses td and its buffers.
func TestSendGivenUpAtDeadline(t *testing.T) {
	g := mpitest.Need(t, 2)
	const leaves, n = 2, 1 << 20 // 2 × 8 MiB of float64
	for _, m := range sendModes {
		mpitest.Run(t, m.name, func(t *testing.T) {
			td := bigTD(t, leaves, n, 0)
			switch g.Rank() {
			case 0:
				fill(t, td, 1)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := m.send(td, 1, ctx)
				took := time.Since(start)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Contains(t, err.Error(), "given up")
				assert.Less(t, took, 5*time.Second, "bounded by the deadline")
				t.Logf("given up after %v (deadline 200ms), %d sends left to package mpi", took, mpix.InFlight())
				assert.Positive(t, mpix.InFlight(), "the sends stay with package mpi")
				fill(t, td, 2) // before the receiver starts: see below
				require.NoError(t, g.Barrier())
				require.NoError(t, m.send(td, 1, mpitest.Ctx(t, 30*time.Second)))
				deadline := time.Now().Add(10 * time.Second)
				for mpix.InFlight() > 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				assert.Zero(t, mpix.InFlight(), "the given-up sends completed once received")
			case 1:
				require.NoError(t, g.Barrier())
				first := m.recv(t, td, 0)
				if m.name == "Send per leaf" || m.name == "ISend" || m.name == "InitRemote" {
					// Per-leaf messages, and InitRemote's runs of leaves of
					// wire.RunMin bytes or more, are the sender's leaves
					// themselves: MPI reads them when this side receives,
					// after the sender changed them.
					assert.True(t, first.EqScalar(2).All(), "the given-up transfer, with the leaves as they are now")
				} else {
					// A packed storage is the transfer's own: the next send
					// packs into a new buffer.
					assert.True(t, first.EqScalar(1).All(), "the given-up transfer, as it was packed")
				}
				second := m.recv(t, bigTD(t, leaves, n, 0), 0)
				assert.True(t, second.EqScalar(2).All(), "then the next one")
			default:
				require.NoError(t, g.Barrier())
			}
		})
	}
}

// TestSendWaitBoundedByContext: a Send with a context that waits for
// another transfer, of the same TensorDict or on the same tags, to a
// receiver that does not receive yet, returns at its deadline having sent
// nothing.
func TestSendWaitBoundedByContext(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n, tag = 1 << 20, 70 // 8 MiB: the first Send blocks until received
	switch g.Rank() {
	case 0:
		busy := bigTD(t, 1, n, 1)
		first := make(chan error, 1)
		go func() { first <- busy.Send(1, WithTag(tag)) }()
		other := bigTD(t, 1, n, 2)         // made before any deadline runs: slow under -race
		time.Sleep(100 * time.Millisecond) // the first Send holds its locks
		for _, w := range []struct {
			name, want string
			send       func(ctx context.Context) error
		}{
			{"same tags", "waiting for another transfer on tags", func(ctx context.Context) error {
				return other.Send(1, WithTag(tag), WithContext(ctx))
			}},
			{"same TensorDict", "waiting for another transfer of this TensorDict", func(ctx context.Context) error {
				return busy.Send(1, WithTag(tag+1), WithContext(ctx))
			}},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			err := w.send(ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, w.name)
			assert.Contains(t, err.Error(), w.want, w.name)
		}
		require.NoError(t, g.Barrier())
		require.NoError(t, <-first)
		require.NoError(t, bigTD(t, 1, n, 3).Send(1, WithTag(tag)))
	case 1:
		require.NoError(t, g.Barrier())
		for _, want := range []float64{1, 3} {
			got := bigTD(t, 1, n, 0)
			_, err := got.Recv(0, WithTag(tag), testCtx(t))
			require.NoError(t, err)
			checkBigTD(t, got, 1, n, want)
		}
	default:
		require.NoError(t, g.Barrier())
	}
}
