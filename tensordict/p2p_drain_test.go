// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// drainModes are the two transfer modes of Send and Recv.
var drainModes = []struct {
	name string
	opts []any
}{
	{"per leaf", nil},
	{"consolidated", []any{WithConsolidated()}},
}

// TestIRecvReleasedDrains: an IRecv into a TensorDict released before its
// transfer arrives returns an error wrapping tensor.ErrReleased from Wait
// and consumes the transfer, as Recv does: the sender's blocking Send of a
// transfer too large for MPI to buffer returns, and the next transfer on
// the same tag arrives intact, not the stale one.
func TestIRecvReleasedDrains(t *testing.T) {
	g := mpitest.Need(t, 2)
	const tag = 931
	for _, m := range drainModes {
		mpitest.Run(t, m.name, func(t *testing.T) {
			if g.Rank() > 1 {
				require.NoError(t, g.Barrier()) // the world's barrier below
				return
			}
			opts := append([]any{WithTag(tag)}, m.opts...)
			if g.Rank() == 0 {
				require.NoError(t, g.Barrier()) // the receiver has released its TensorDict
				td := bigTD(t, 2, 1<<18, 6)     // 2 MiB leaves, beyond any eager limit
				sctx := WithContext(mpitest.Ctx(t, 20*time.Second))
				require.NoError(t, td.Send(1, mpitest.As[SendOption](append(opts, sctx))...), "the Send into the released IRecv")
				require.NoError(t, bigTD(t, 2, 1<<18, 7).Send(1, mpitest.As[SendOption](append(opts, sctx))...))
				return
			}
			// A consolidated TensorDict, whose storage Release releases
			// (heap storages are left to the collector).
			td, err := bigTD(t, 2, 1<<18, 0).Consolidate()
			require.NoError(t, err)
			p, err := td.IRecv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
			require.NoError(t, err)
			require.NoError(t, td.Release())
			require.NoError(t, g.Barrier())
			err = p.Wait()
			require.ErrorIs(t, err, tensor.ErrReleased)
			next := bigTD(t, 2, 1<<18, 0)
			_, err = next.Recv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
			require.NoError(t, err)
			checkBigTD(t, next, 2, 1<<18, 7)
			noTransferState(t)
		})
	}
}

// TestIRecvDroppedDrains: an IRecv whose Pending is dropped without Wait
// and collected before its transfer comes still takes the transfer, and
// discards it, so that the sender's blocking Send of a transfer too large
// for MPI to buffer returns while the receiver only runs the collector;
// the next transfer on the same tag then arrives intact.
func TestIRecvDroppedDrains(t *testing.T) {
	g := mpitest.Need(t, 2)
	const tag, goTag, doneTag = 932, 933, 934
	for _, m := range drainModes {
		mpitest.Run(t, m.name, func(t *testing.T) {
			if g.Rank() > 1 {
				return
			}
			opts := append([]any{WithTag(tag)}, m.opts...)
			if g.Rank() == 0 {
				var b [1]byte
				_, err := mpi.Recv(proto.LibComm(g), b[:], 1, goTag) // the IRecv was collected
				require.NoError(t, err)
				sctx := WithContext(mpitest.Ctx(t, 30*time.Second)) // the hang guard
				err = bigTD(t, 2, 1<<18, 6).Send(1, mpitest.As[SendOption](append(opts, sctx))...)
				assert.NoError(t, err, "the Send to the dropped IRecv")
				b[0] = 0
				if err == nil {
					b[0] = 1
				}
				require.NoError(t, mpi.Send(proto.LibComm(g), b[:], 1, doneTag))
				require.NoError(t, bigTD(t, 2, 1<<18, 7).Send(1, mpitest.As[SendOption](append(opts, sctx))...))
				return
			}
			start := runtime.NumGoroutine()
			td := bigTD(t, 2, 1<<18, 0)
			_, err := td.IRecv(0, mpitest.As[RecvOption](opts)...)
			require.NoError(t, err)
			for range 3 {
				runtime.GC() // collects the Pending
			}
			require.NoError(t, mpi.Send(proto.LibComm(g), []byte{1}, 0, goTag))
			// Only the collector runs here, and no receive of this
			// package, until the sender says how its Send ended.
			var b [1]byte
			deadline := time.Now().Add(45 * time.Second)
			for {
				ok, _, err := mpi.Iprobe(proto.LibComm(g), 0, doneTag)
				require.NoError(t, err)
				if ok {
					_, err = mpi.Recv(proto.LibComm(g), b[:], 0, doneTag)
					require.NoError(t, err)
					break
				}
				require.True(t, time.Now().Before(deadline), "the sender never said how its Send ended")
				runtime.GC()
				time.Sleep(5 * time.Millisecond)
			}
			require.Equal(t, byte(1), b[0], "the sender's Send failed")
			next := bigTD(t, 2, 1<<18, 0)
			_, err = next.Recv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
			require.NoError(t, err)
			checkBigTD(t, next, 2, 1<<18, 7)
			assert.LessOrEqual(t, settle(start), start+goroutineSlack, "goroutines left")
			noTransferState(t)
		})
	}
}

// TestRecvNamesTagMismatch: a receive whose sender uses other tags
// (WithPseudoRandTags on one side only) says so when it times out, naming
// the tag the sender's message waits on, for Recv and IRecv; a message
// on the header's tag that cannot be a header (a stray leaf) is refused
// with an error naming the tag and the options, not only the header's
// fault. The transfer is then received with the sender's options.
func TestRecvNamesTagMismatch(t *testing.T) {
	g := mpitest.Need(t, 2)
	const tag, strayTag = 950, 955
	pseudoHeader := xfer.LeafTags(nil, 1, tag, true)[0]
	for _, irecv := range []bool{false, true} {
		mpitest.Run(t, map[bool]string{false: "Recv", true: "IRecv"}[irecv], func(t *testing.T) {
			if g.Rank() > 1 {
				return
			}
			if g.Rank() == 0 {
				sctx := WithContext(mpitest.Ctx(t, 30*time.Second))
				require.NoError(t, bigTD(t, 2, 1<<15, 3).Send(1, WithTag(tag), WithPseudoRandTags(), sctx))
				stray := make([]byte, 1<<20) // a leaf's message, larger than any header message
				require.NoError(t, mpi.Send(proto.LibComm(g), stray, 1, strayTag))
				return
			}
			td := bigTD(t, 2, 1<<15, 0)
			short := WithContext(mpitest.Ctx(t, 500*time.Millisecond))
			var err error
			if irecv {
				var p *Pending
				if p, err = td.IRecv(0, WithTag(tag), short); err == nil {
					err = p.Wait()
				}
			} else {
				_, err = td.Recv(0, WithTag(tag), short)
			}
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorContains(t, err, fmt.Sprintf("nothing came on tag %d, but a message from rank 0 waits on tag %d: does the sender use other tags than this side's WithTag(%d)?", tag, pseudoHeader, tag))
			_, err = td.Recv(0, WithTag(tag), WithPseudoRandTags(), testCtx(t))
			require.NoError(t, err)
			checkBigTD(t, td, 2, 1<<15, 3)

			_, err = td.Recv(0, WithTag(strayTag), testCtx(t))
			require.ErrorIs(t, err, wire.ErrHeader)
			assert.ErrorContains(t, err, fmt.Sprintf("not a header on tag %d? a leaf of a transfer whose tags are not this side's WithTag(%d) lands there", strayTag, strayTag))
		})
	}
}
