// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// mismatchTD returns {a: float32[n], b: {c: int64[m]}, d: uint8[n]} with
// every element 1, and m given; leaves are large enough to take Open MPI's
// rendezvous path, where a sender waits for its receiver.
func mismatchTD(t *testing.T, m int, cDType tensor.DType) *tensordict.TensorDict {
	t.Helper()
	const n = 256 << 10
	td := tensordict.New()
	require.NoError(t, td.Set(tensordict.K("a"), tensor.Ones(tensor.Float32, n)))
	require.NoError(t, td.Set(tensordict.K("b", "c"), tensor.Ones(cDType, m)))
	require.NoError(t, td.Set(tensordict.K("d"), tensor.Ones(tensor.Uint8, n)))
	return td
}

// inTime runs f in a goroutine and returns its error, or an error if it
// has not returned within d (f is then left running: the test fails and
// agreement ends the job if it never returns).
func inTime(d time.Duration, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		return fmt.Errorf("still blocked after %v", d)
	}
}

// TestRecvIntoDifferentStructure: the receiver's TensorDict differs from
// the sender's at key (b, c) (shape, then dtype); Recv returns an
// ErrMismatch error naming that key, the sender's Send returns without
// hanging, and the next, matching transfer between the same ranks on the
// same tags works.
func TestRecvIntoDifferentStructure(t *testing.T) {
	world := mpitest.Need(t, 2)
	cases := []struct {
		name         string
		m            int
		dt           tensor.DType
		consolidated bool
	}{
		{"shape per leaf", 5, tensor.Int64, false},
		{"shape consolidated", 5, tensor.Int64, true},
		{"dtype per leaf", 3, tensor.Int32, false},
		{"dtype consolidated", 3, tensor.Int32, true},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			me := world.Rank()
			if me > 1 {
				return
			}
			var opts []any
			if c.consolidated {
				opts = append(opts, tensordict.WithConsolidated())
			}
			ctx := mpitest.Ctx(t, hangLimit)
			recvOpts := append([]any{tensordict.WithContext(ctx)}, opts...)
			if me == 0 {
				td := mismatchTD(t, 3, tensor.Int64)
				require.NoError(t, inTime(hangLimit, func() error { return td.Send(1, mpitest.As[tensordict.SendOption](opts)...) }), "the sender of a refused transfer")
				require.NoError(t, inTime(hangLimit, func() error { return td.Send(1, mpitest.As[tensordict.SendOption](opts)...) }), "the sender of the matching transfer")
				return
			}
			wrong := mismatchTD(t, c.m, c.dt)
			_, err := wrong.Recv(0, mpitest.As[tensordict.RecvOption](recvOpts)...)
			require.Error(t, err)
			t.Logf("Recv: %v", err)
			assert.ErrorIs(t, err, tensordict.ErrMismatch)
			assert.Regexp(t, `\(b, c\)|b\.c|\[b c\]|"b", "c"`, err.Error(), "the error names the first differing key")
			assert.NotContains(t, err.Error(), "key a", "key a matches")
			all, _ := wrong.Get(tensordict.K("a"))
			v, _ := tensor.Data[float32](all)
			assert.Equal(t, float32(1), v[0], "the refused receive leaves the TensorDict unchanged")

			right := mismatchTD(t, 3, tensor.Int64)
			zero(t, right)
			_, err = right.Recv(0, mpitest.As[tensordict.RecvOption](recvOpts)...)
			require.NoError(t, err, "the matching transfer after a refused one")
			assert.True(t, right.EqScalar(1).All(), "the matching transfer's content")
		})
	}
}

// zero sets every leaf of td to 0.
func zero(t *testing.T, td *tensordict.TensorDict) {
	t.Helper()
	for _, k := range td.Keys(tensordict.LeavesOnly(), tensordict.IncludeNested()) {
		x, err := td.Get(k)
		require.NoError(t, err)
		b, err := x.Bytes()
		require.NoError(t, err)
		clear(b)
	}
}

// TestCrossedReceives: ranks 0 and 1 both wait for the other (both call
// FromRemoteInit, or both Recv), a deadlock by design. With a context each
// returns an error wrapping context.DeadlineExceeded, in about the
// deadline, and a normal exchange works afterwards.
//
// The phases cannot overlap whatever the ranks' timing: the crossed
// receives run on a group of their own (ranks 0 and 1), both ranks pass
// that group's barrier once their receive has returned, and only then
// does the exchange run, on the world. Without the barrier a rank that
// started the subtest late could still be in its 500 ms receive when the
// other's InitRemote arrived, and take it.
func TestCrossedReceives(t *testing.T) {
	world := mpitest.Need(t, 2)
	const deadline = 500 * time.Millisecond
	for _, op := range []string{"FromRemoteInit", "Recv"} {
		mpitest.Run(t, op, func(t *testing.T) {
			me := world.Rank()
			if me > 1 {
				return
			}
			pair, err := world.New([]int{0, 1})
			require.NoError(t, err)
			defer pair.Free()
			peer := 1 - me
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			opts := []any{tensordict.WithGroup(pair), tensordict.WithContext(ctx)}
			td := mismatchTD(t, 3, tensor.Int64)
			start := time.Now()
			err = inTime(hangLimit, func() error {
				if op == "FromRemoteInit" {
					_, err := tensordict.FromRemoteInit(peer, mpitest.As[tensordict.RemoteOption](opts)...)
					return err
				}
				_, err := td.Recv(peer, mpitest.As[tensordict.RecvOption](opts)...)
				return err
			})
			took := time.Since(start)
			// Both receives have returned (or inTime gave up on this one)
			// before either rank sends anything.
			require.NoError(t, inTime(hangLimit, pair.Barrier), "the barrier after the crossed receives")
			require.Error(t, err)
			t.Logf("rank %d: %v after %v", me, err, took.Round(time.Millisecond))
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), op)
			assert.Less(t, took, deadline+hangLimit)

			// The failed receives consumed nothing: a normal exchange works.
			ctx2 := mpitest.Ctx(t, hangLimit)
			if me == 0 {
				require.NoError(t, td.InitRemote(1))
			} else {
				got, err := tensordict.FromRemoteInit(0, tensordict.WithContext(ctx2))
				require.NoError(t, err)
				require.NoError(t, tensordict.DiffStructure(td, got))
				assert.True(t, got.EqScalar(1).All())
			}
		})
	}
}

// TestSubgroupRankOutOfRange: the ranks of a subgroup (the upper half of
// the world) pass a world rank that is not a rank of the subgroup (the
// last world rank, which is at least the subgroup's size) to every
// operation. Each returns at once with an error naming the operation, the
// rank and the valid range, and nothing hangs; GroupRank gives the right
// rank.
func TestSubgroupRankOutOfRange(t *testing.T) {
	world := mpitest.Need(t, 2)
	n := world.Size()
	var members []int
	for r := n / 2; r < n; r++ {
		members = append(members, r)
	}
	if world.Rank() < n/2 {
		return
	}
	sub, err := world.New(members)
	require.NoError(t, err)
	defer sub.Free()
	bad := n - 1 // a world rank, >= sub.Size()
	require.GreaterOrEqual(t, bad, sub.Size())
	rng := fmt.Sprintf("[0, %d)", sub.Size())
	td := mismatchTD(t, 3, tensor.Int64)
	ctx := mpitest.Ctx(t, hangLimit)
	opts := []any{tensordict.WithGroup(sub), tensordict.WithContext(ctx)}
	calls := []struct {
		op  string
		run func() error
	}{
		{"InitRemote", func() error { return td.InitRemote(bad, mpitest.As[tensordict.RemoteOption](opts)...) }},
		{"FromRemoteInit", func() error {
			_, err := tensordict.FromRemoteInit(bad, mpitest.As[tensordict.RemoteOption](opts)...)
			return err
		}},
		{"Send", func() error { return td.Send(bad, mpitest.As[tensordict.SendOption](opts)...) }},
		{"Recv", func() error { _, err := td.Recv(bad, mpitest.As[tensordict.RecvOption](opts)...); return err }},
		{"ISend", func() error { _, err := td.ISend(bad, mpitest.As[tensordict.SendOption](opts)...); return err }},
		{"IRecv", func() error { _, err := td.IRecv(bad, mpitest.As[tensordict.RecvOption](opts)...); return err }},
		{"Broadcast", func() error {
			_, err := td.Broadcast(bad, mpitest.As[tensordict.CollectiveOption](opts)...)
			return err
		}},
		{"Reduce", func() error {
			return td.Reduce(bad, tensordict.ReduceSum, mpitest.As[tensordict.CollectiveOption](opts)...)
		}},
		{"InitRemote", func() error {
			return td.InitRemote(0, mpitest.As[tensordict.RemoteOption](append(opts, tensordict.WithBroadcast()))...)
		}},
		{"FromRemoteInit", func() error {
			_, err := tensordict.FromRemoteInit(bad, mpitest.As[tensordict.RemoteOption](append(opts, tensordict.WithBroadcast()))...)
			return err
		}},
	}
	for i, c := range calls {
		if i == 8 {
			// InitRemote in broadcast mode ignores dst: only the
			// receivers' src can be wrong; skip the root's call.
			continue
		}
		start := time.Now()
		err := inTime(hangLimit, c.run)
		if assert.Error(t, err, c.op) {
			assert.Contains(t, err.Error(), "tensordict: "+c.op, c.op)
			assert.Contains(t, err.Error(), fmt.Sprintf("%d is out of range %s", bad, rng), c.op)
			// A check of the argument: far less than the context's
			// hangLimit, which an operation that waited would reach.
			assert.Less(t, time.Since(start), hangLimit/3, "%s waited instead of refusing the rank", c.op)
			t.Logf("%s: %v", c.op, err)
		}
	}
	gr, err := sub.GroupRank(bad)
	require.NoError(t, err)
	assert.Equal(t, sub.Size()-1, gr, "GroupRank of the last world rank")
	_, err = sub.GroupRank(n)
	assert.Error(t, err, "GroupRank of a rank outside the world")
}

// TestRecvOverLimit: a receiver whose WithMaxBytes is below what a
// well-behaved sender sends refuses the transfer with an error wrapping
// wire.ErrLimit; the sender does not hang, and the next transfer between
// the two ranks, within the limit, works.
//
// This found Recv draining one message too few after refusing a Send
// header (the metadata message counted as a chunk) and sweeping the tag for
// 2 s (tensordict/p2p.go, recvHeader); it now drains exactly what the
// header announces.
func TestRecvOverLimit(t *testing.T) {
	world := mpitest.Need(t, 2)
	for _, op := range []string{"InitRemote", "Send/Recv"} {
		mpitest.Run(t, op, func(t *testing.T) {
			me := world.Rank()
			if me > 1 {
				return
			}
			big := mismatchTD(t, 3, tensor.Int64) // 1.25 MiB
			small := healthyTD(t)
			ctx := mpitest.Ctx(t, hangLimit)
			const limit = 64 << 10
			if me == 0 {
				err := inTime(hangLimit, func() error {
					if op == "InitRemote" {
						return big.InitRemote(1)
					}
					return big.Send(1, tensordict.WithConsolidated())
				})
				require.NoError(t, err, "the sender of the refused transfer")
				if op == "InitRemote" {
					require.NoError(t, small.InitRemote(1))
				} else {
					require.NoError(t, inTime(hangLimit, func() error { return small.Send(1, tensordict.WithConsolidated()) }))
				}
				return
			}
			var err error
			if op == "InitRemote" {
				_, err = tensordict.FromRemoteInit(0, tensordict.WithMaxBytes(limit), tensordict.WithContext(ctx))
			} else {
				_, err = big.Recv(0, tensordict.WithConsolidated(), tensordict.WithMaxBytes(limit), tensordict.WithContext(ctx))
			}
			require.Error(t, err)
			t.Logf("refused: %v", err)
			assert.ErrorIs(t, err, wire.ErrLimit)
			if op == "InitRemote" {
				got, err := tensordict.FromRemoteInit(0, tensordict.WithMaxBytes(limit), tensordict.WithContext(ctx))
				require.NoError(t, err, "the transfer after the refused one")
				assert.True(t, got.EqScalar(7).All())
				return
			}
			zero(t, small)
			_, err = small.Recv(0, tensordict.WithConsolidated(), tensordict.WithMaxBytes(limit), tensordict.WithContext(ctx))
			require.NoError(t, err, "the transfer after the refused one")
			assert.True(t, small.EqScalar(7).All())
		})
	}
}
