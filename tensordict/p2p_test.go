// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// fill sets every element of every leaf of td to v.
func fill(t testing.TB, td *TensorDict, v float64) {
	t.Helper()
	for _, it := range td.Items(IncludeNested(), LeavesOnly()) {
		require.NoError(t, td.SetInPlace(it.Key, tensor.Full(it.Tensor.DType(), v, it.Tensor.Shape()...)))
	}
}

// p2pTD is a structure with nested keys, several dtypes and an insertion
// order that differs from the sorted order.
func p2pTD(t testing.TB) *TensorDict {
	t.Helper()
	td := New(3)
	require.NoError(t, td.Set(K("z"), tensor.Zeros(tensor.Float32, 3, 2)))
	require.NoError(t, td.Set(K("a", "y"), tensor.Zeros(tensor.Int64, 3)))
	require.NoError(t, td.Set(K("a", "b"), tensor.Zeros(tensor.Uint8, 3, 5)))
	require.NoError(t, td.Set(K("_"), tensor.Zeros(tensor.Float64, 3)))
	return td
}

// consolidatedP2PTD returns p2pTD consolidated, with the length of its
// metadata as Send sends it and the size of its storage.
func consolidatedP2PTD(t testing.TB) (td *TensorDict, metaLen, total int) {
	t.Helper()
	td, err := p2pTD(t).Consolidate()
	require.NoError(t, err)
	s, err := p2pStateOf("test", td)
	require.NoError(t, err)
	defer s.mu.Unlock()
	return td, len(s.meta), s.total
}

func TestSendRecvConsolidatedSteadyState(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for _, size := range []int{4, 1 << 20} { // inline and separate payload
		var td *TensorDict
		if g.Rank() == 0 {
			td = bigTD(t, 3, size, 0)
			require.NoError(t, td.InitRemote(1))
		} else {
			var err error
			td, err = FromRemoteInit(0, testCtx(t))
			require.NoError(t, err)
		}
		for round := 1; round <= 3; round++ {
			if g.Rank() == 0 {
				fill(t, td, float64(round))
				require.NoError(t, td.Send(1, WithConsolidated()))
				continue
			}
			tag, err := td.Recv(0, WithConsolidated(), testCtx(t))
			require.NoError(t, err)
			assert.Equal(t, 0, tag)
			assert.True(t, td.EqScalar(float64(round)).All(), "size %d round %d", size, round)
		}
		// The steady state allocates nothing on either side, beyond what
		// package mpi's Probe and Recv allocate themselves (measured here).
		allocs := testing.AllocsPerRun(20, func() {
			var err error
			if g.Rank() == 0 {
				err = td.Send(1, WithConsolidated())
			} else {
				_, err = td.Recv(0, WithConsolidated())
			}
			if err != nil {
				panic(err)
			}
		})
		msg := xfer.AlignedBuf(64)
		raw := testing.AllocsPerRun(20, func() {
			var err error
			if g.Rank() == 0 {
				err = mpi.Send(proto.LibComm(g), msg, 1, 99)
			} else {
				_, err = mpi.Probe(proto.LibComm(g), 0, 99)
				if err == nil {
					_, err = mpi.Recv(proto.LibComm(g), msg, 0, 99)
				}
			}
			if err != nil {
				panic(err)
			}
		})
		calls := 2.0 // header and metadata (with the storage inline)
		if size > p2pInlineMax/8 {
			calls = 3
		}
		t.Logf("rank %d, %d bytes: %v allocations per call; package mpi allocates %v per Probe+Recv", g.Rank(), 3*size*8, allocs, raw)
		assert.LessOrEqual(t, allocs, calls*raw, "size %d rank %d", size, g.Rank())
	}
}

func TestSendRecvConsolidatedNotConsolidated(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td := p2pTD(t)
	if g.Rank() == 0 {
		fill(t, td, 7)
		require.NoError(t, td.Send(1, WithConsolidated(), WithTag(3)))
		return
	}
	tag, err := td.Recv(0, WithConsolidated(), WithTag(3), testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, 3, tag)
	assert.True(t, td.EqScalar(7).All())
}

// TestSendRecvConsolidatedJoined sends consolidated storages on both
// sides of the size from which Send leaves an inline storage in place
// (xfer.EagerSendMax), from a consolidated TensorDict and from one it packs,
// the first transfer with the metadata and the next ones without, and
// checks every element on the receiver.
func TestSendRecvConsolidatedJoined(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	build := func(t *testing.T, n int, round float64, consolidated bool) *TensorDict {
		a, err := tensor.Arange(tensor.Float64, round*1e6, round*1e6+float64(n), 1)
		require.NoError(t, err)
		b, err := tensor.Arange(tensor.Uint8, 0, 7, 1)
		require.NoError(t, err)
		td := New()
		require.NoError(t, td.Set(K("a"), a))
		require.NoError(t, td.Set(K("b", "c"), b.AddScalar(round)))
		if consolidated {
			td, err = td.Consolidate()
			require.NoError(t, err)
		}
		return td
	}
	// float64 elements of "a": under 4000 bytes with the header (a message
	// MPI moves eagerly under Open MPI), over it, and past 8 KiB (MPICH's
	// eager limit) with it, the storage alone just under either.
	for _, n := range []int{250, 497, 500, 520, 1020, 1030, 2000} {
		for _, consolidated := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d bytes consolidated %v", 8*n, consolidated), func(t *testing.T) {
				src := build(t, n, 0, consolidated)
				if g.Rank() == 1 {
					dst := build(t, n, 0, false)
					for round := 1.0; round <= 3; round++ {
						_, err := dst.Recv(0, WithConsolidated(), WithTag(5), testCtx(t))
						require.NoError(t, err)
						eq, err := dst.Eq(build(t, n, round, false))
						require.NoError(t, err)
						assert.True(t, eq.All(), "round %v", round)
					}
					return
				}
				for round := 1.0; round <= 3; round++ {
					for _, it := range build(t, n, round, false).Items(IncludeNested(), LeavesOnly()) {
						require.NoError(t, src.SetInPlace(it.Key, it.Tensor))
					}
					require.NoError(t, src.Send(1, WithConsolidated(), WithTag(5)))
				}
			})
		}
	}
}

// TestSendRecvConsolidatedRemote sends consolidated storages around
// p2pInlineMax and remoteInlineMax, blocking, with a context and with
// ISend, into Recv and IRecv, and checks that the header message carries
// the storage as far as rank 1's node allows: p2pInlineMax on this node
// (mpirun), remoteInlineMax on another (the local cluster's nodes, make
// cluster-test). Whichever node rank 1 is on, it also checks where
// storageTravel puts each storage with remoteInlineMax, the limit to
// another node.
func TestSendRecvConsolidatedRemote(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	build := func(t *testing.T, n int, round float64) *TensorDict {
		a, err := tensor.Arange(tensor.Float64, round*1e6, round*1e6+float64(n), 1)
		require.NoError(t, err)
		td := New()
		require.NoError(t, td.Set(K("a"), a))
		require.NoError(t, td.Set(K("b"), tensor.Full(tensor.Uint8, round, 7)))
		td, err = td.Consolidate()
		require.NoError(t, err)
		return td
	}
	header := func(t *testing.T, td *TensorDict) wire.Header {
		l := new(link)
		resolveInto(&l.o, []SendOption{WithConsolidated()}, usesSend)
		require.NoError(t, l.init("Send", 1, "to"))
		s, err := lockState(l, td)
		require.NoError(t, err)
		defer s.mu.Unlock()
		require.NoError(t, s.prepare(l))
		return s.header(l)
	}
	// Storages (8n bytes of "a", 8 of "b"): 16,328 and 16,808 bytes,
	// either side of p2pInlineMax; 64 KiB; 131,064 and 131,208, either
	// side of remoteInlineMax.
	for _, n := range []int{2040, 2100, 8191, 16382, 16400} {
		total := 8*n + 8
		t.Run(fmt.Sprintf("%d bytes", total), func(t *testing.T) {
			if g.Rank() == 1 {
				dst := build(t, n, 0)
				for round := 1.0; round <= 4; round++ {
					if round == 4 {
						p, err := dst.IRecv(0, WithConsolidated(), WithTag(6))
						require.NoError(t, err)
						require.NoError(t, p.Wait())
					} else {
						_, err := dst.Recv(0, WithConsolidated(), WithTag(6), testCtx(t))
						require.NoError(t, err)
					}
					eq, err := dst.Eq(build(t, n, round))
					require.NoError(t, err)
					assert.True(t, eq.All(), "round %v", round)
				}
				return
			}
			src := build(t, n, 0)
			h := header(t, src)
			copied, joined := storageTravel(wire.Size+int(h.MetaLen), total, remoteInlineMax)
			assert.Equal(t, total <= remoteInlineMax, copied || joined, "to another node")
			most := p2pInlineMax // rank 1 where it is: this node under mpirun
			if !g.SameNode(1) {
				most = remoteInlineMax // another node of the local cluster (make cluster-test)
			}
			assert.Equal(t, total <= most, h.Flags&wire.FlagInline != 0, "to rank 1, same node %v", g.SameNode(1))
			for round := 1.0; round <= 4; round++ {
				for _, it := range build(t, n, round).Items(LeavesOnly()) {
					require.NoError(t, src.SetInPlace(it.Key, it.Tensor))
				}
				switch round {
				case 2:
					require.NoError(t, src.Send(1, WithConsolidated(), WithTag(6), testCtx(t)))
				case 3:
					p, err := src.ISend(1, WithConsolidated(), WithTag(6))
					require.NoError(t, err)
					require.NoError(t, p.Wait())
				default:
					require.NoError(t, src.Send(1, WithConsolidated(), WithTag(6)))
				}
			}
		})
	}
}

func TestSendRecvPerLeaf(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for _, tc := range []struct {
		name string
		opts []any
		last int
	}{
		{"default", nil, 3},
		{"init tag", []any{WithTag(10)}, 13},
		{"pseudo-random", []any{WithPseudoRandTags()}, xfer.LeafTags(nil, 4, 0, true)[3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := p2pTD(t)
			if g.Rank() == 0 {
				fill(t, td, 5)
				require.NoError(t, td.Send(1, mpitest.As[SendOption](tc.opts)...))
				return
			}
			tag, err := td.Recv(0, mpitest.As[RecvOption](append(tc.opts, testCtx(t)))...)
			require.NoError(t, err)
			assert.Equal(t, tc.last, tag)
			assert.True(t, td.EqScalar(5).All())
		})
	}
}

func TestSendRecvNonblocking(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for _, consolidated := range []bool{false, true} {
		var opts []any
		if consolidated {
			opts = append(opts, WithConsolidated())
		}
		// ISend -> Recv, then Send -> IRecv, on 1 MiB leaves.
		td := bigTD(t, 2, 1<<17, 0)
		if g.Rank() == 0 {
			fill(t, td, 1)
			p, err := td.ISend(1, mpitest.As[SendOption](opts)...)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			fill(t, td, 2)
			require.NoError(t, td.Send(1, mpitest.As[SendOption](opts)...))
			continue
		}
		_, err := td.Recv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
		require.NoError(t, err)
		assert.True(t, td.EqScalar(1).All())
		p, err := td.IRecv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
		require.NoError(t, err)
		require.NoError(t, p.Wait())
		done, err := p.Test()
		assert.True(t, done)
		assert.NoError(t, err)
		assert.True(t, td.EqScalar(2).All())
	}
}

func TestRecvMismatch(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for _, tc := range []struct {
		name string
		opts []any
	}{{"per leaf", nil}, {"consolidated", []any{WithConsolidated()}}} {
		t.Run(tc.name, func(t *testing.T) {
			td := New(3)
			require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float32, 3)))
			if g.Rank() == 0 {
				require.NoError(t, td.Set(K("n", "x"), tensor.Ones(tensor.Float32, 3, 1<<16)))
				// The receiver refuses, and this Send still returns.
				require.NoError(t, td.Send(1, mpitest.As[SendOption](tc.opts)...))
				require.NoError(t, td.Send(1, mpitest.As[SendOption](tc.opts)...))
				ok := New(3)
				require.NoError(t, ok.Set(K("a"), tensor.Full(tensor.Float32, 4, 3)))
				require.NoError(t, ok.Send(1, mpitest.As[SendOption](tc.opts)...))
				return
			}
			require.NoError(t, td.Set(K("n", "x"), tensor.Zeros(tensor.Float32, 3, 2)))
			_, err := td.Recv(0, mpitest.As[RecvOption](append(tc.opts, testCtx(t)))...)
			require.ErrorIs(t, err, ErrMismatch)
			assert.Contains(t, err.Error(), "n.x")
			assert.Contains(t, err.Error(), "Recv: rank 1")
			a, err := td.Get(K("a"))
			require.NoError(t, err)
			assert.True(t, a.Equal(tensor.Ones(tensor.Float32, 3)), "td is left unchanged")
			// The second transfer leaves the metadata out (wire.FlagDescribed):
			// the mismatch is still caught, by the structure hash.
			p, err := td.IRecv(0, mpitest.As[RecvOption](append(tc.opts, testCtx(t)))...)
			require.NoError(t, err)
			err = p.Wait()
			require.ErrorIs(t, err, ErrMismatch)
			assert.Contains(t, err.Error(), "only with its first transfer")
			ok := New(3)
			require.NoError(t, ok.Set(K("a"), tensor.Zeros(tensor.Float32, 3)))
			_, err = ok.Recv(0, mpitest.As[RecvOption](append(tc.opts, testCtx(t)))...)
			require.NoError(t, err)
			assert.True(t, ok.EqScalar(4).All())
		})
	}
}

// TestSendDescribedOnce: a TensorDict's first Send to a rank on a tag
// carries its metadata, the next ones only the header (and the inline
// storage), which any receiver of the same structure accepts; a change of
// structure, another mode or another tag carries the metadata again.
func TestSendDescribedOnce(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td, metaLen, total := consolidatedP2PTD(t)
	full, bare := int64(wire.Size+metaLen+total), int64(wire.Size+total)
	steps := []struct {
		opts []any
		tag  int   // of the header message
		size int64 // of the header message
	}{
		{[]any{WithConsolidated()}, 0, full},
		{[]any{WithConsolidated()}, 0, bare},
		{[]any{WithConsolidated()}, 0, bare},
		{[]any{WithConsolidated(), WithTag(5)}, 5, full},
		{[]any{WithConsolidated(), WithTag(5)}, 5, bare},
		{nil, 0, int64(wire.Size + metaLen)}, // per leaf: the leaves follow
		{nil, 0, wire.Size},
		{[]any{WithConsolidated()}, 0, bare},
	}
	for i, st := range steps {
		if g.Rank() == 0 {
			fill(t, td, float64(i))
			require.NoError(t, td.Send(1, mpitest.As[SendOption](st.opts)...), "step %d", i)
			continue
		}
		status, err := mpi.Probe(proto.LibComm(g), 0, st.tag)
		require.NoError(t, err)
		assert.Equal(t, st.size, status.Bytes(), "step %d: header message", i)
		// A receiver that never saw the metadata takes it as well.
		into := p2pTD(t)
		_, err = into.Recv(0, mpitest.As[RecvOption](append(st.opts, testCtx(t)))...)
		require.NoError(t, err, "step %d", i)
		assert.True(t, into.EqScalar(float64(i)).All(), "step %d", i)
	}
	// A new structure is described again.
	if g.Rank() == 0 {
		require.NoError(t, td.Set(K("new"), tensor.Zeros(tensor.Float32, 3)))
		fill(t, td, 7)
		require.NoError(t, td.Send(1, WithConsolidated()))
		return
	}
	status, err := mpi.Probe(proto.LibComm(g), 0, 0)
	require.NoError(t, err)
	assert.Greater(t, status.Bytes(), full, "the changed structure's metadata")
	into := p2pTD(t)
	require.NoError(t, into.Set(K("new"), tensor.Ones(tensor.Float32, 3)))
	_, err = into.Recv(0, WithConsolidated(), testCtx(t))
	require.NoError(t, err)
	assert.True(t, into.EqScalar(7).All())
}

func TestRecvModeMismatch(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td := p2pTD(t)
	if g.Rank() == 0 {
		require.NoError(t, td.Send(1, WithConsolidated()))
		return
	}
	_, err := td.Recv(0, testCtx(t))
	require.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), "WithConsolidated")
}

// TestRecvOverLimitDrainsExactly: a Recv that refuses a Send over its
// WithMaxBytes drains exactly the messages the refused header announces,
// so that transfers the sender makes right after it, on the same tags, are
// received intact and without waiting.
func TestRecvOverLimitDrainsExactly(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	const limit = 64 << 10
	for _, tc := range []struct {
		name string
		opts []any
	}{
		{"per leaf", nil},
		{"pseudo-random tags", []any{WithPseudoRandTags(), WithTag(7)}},
		{"consolidated", []any{WithConsolidated(), WithTag(5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big := bigTD(t, 3, 1<<16, 1) // 1.5 MiB
			small := bigTD(t, 3, 4, 10)
			if g.Rank() == 0 {
				require.NoError(t, big.Send(1, mpitest.As[SendOption](tc.opts)...))
				require.NoError(t, big.Send(1, mpitest.As[SendOption](tc.opts)...))
				require.NoError(t, small.Send(1, mpitest.As[SendOption](tc.opts)...))
				return
			}
			start := time.Now()
			opts := append(tc.opts, WithMaxBytes(limit), testCtx(t))
			for range 2 {
				_, err := big.Recv(0, mpitest.As[RecvOption](opts)...)
				require.ErrorIs(t, err, wire.ErrLimit)
				assert.Contains(t, err.Error(), "Recv: rank 1")
			}
			fill(t, small, 0)
			_, err := small.Recv(0, mpitest.As[RecvOption](opts)...)
			require.NoError(t, err, "the transfer after the refused ones")
			checkBigTD(t, small, 3, 4, 10)
			assert.Less(t, time.Since(start), xfer.DrainIdle, "draining waited for messages that were never sent")
		})
	}
	// No transfer is in progress: no tag lock is held, and the idle ones
	// are bounded.
	held, _, idle := xfer.TagLocksInUse(group.World())
	assert.Zero(t, held)
	assert.LessOrEqual(t, idle, 2*1024)
}

// TestRecvReleasedStorageDrains checks that a receiver whose storage was
// released fails without leaving a rendezvous-size sender blocked: it takes
// and discards the transfer, and the next transfer on the same tags arrives
// intact.
func TestRecvReleasedStorageDrains(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n = 4 << 20 // float32s: 16 MiB, far over any eager limit
	for _, consolidated := range []bool{true, false} {
		mpitest.Run(t, fmt.Sprintf("consolidated=%v", consolidated), func(t *testing.T) {
			if g.Rank() > 1 {
				return // every rank runs the subtests, for mpitest's agreement
			}
			var opts []any
			if consolidated {
				opts = append(opts, WithConsolidated())
			}
			ctx := mpitest.Ctx(t, 30*time.Second)
			if g.Rank() == 0 {
				td := New()
				require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, 7, n)))
				// Returns only if the receiver took the payload.
				require.NoError(t, td.Send(1, mpitest.As[SendOption](opts)...))
				require.NoError(t, td.Send(1, mpitest.As[SendOption](opts)...))
				return
			}
			x, err := tensor.EmptyOffHeap(tensor.Float32, n)
			require.NoError(t, err)
			gone := New()
			require.NoError(t, gone.Set(K("x"), x))
			require.NoError(t, x.Storage().Release())
			_, err = gone.Recv(0, mpitest.As[RecvOption](append(opts, WithContext(ctx)))...)
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), "released")

			ok := New()
			require.NoError(t, ok.Set(K("x"), tensor.Zeros(tensor.Float32, n)))
			if consolidated {
				ok, err = ok.Consolidate()
				require.NoError(t, err)
			}
			_, err = ok.Recv(0, mpitest.As[RecvOption](append(opts, WithContext(ctx)))...)
			require.NoError(t, err)
			got, err := ok.Get(K("x"))
			require.NoError(t, err)
			assert.Equal(t, float32(7), tensor.Get[float32](got, n-1))
		})
	}
}

// TestISendDroppedPending drops the *Pending of every ISend without Wait
// and collects garbage between sends: the buffers MPI still uses stay
// pinned by package mpi until the sends complete, so the process neither
// crashes (a Pinner collected while pinned panics) nor sends freed memory.
func TestISendDroppedPending(t *testing.T) {
	g := mpitest.Need(t, 2)
	const rounds = 50
	for _, consolidated := range []bool{false, true} {
		mpitest.Run(t, fmt.Sprintf("consolidated=%v", consolidated), func(t *testing.T) {
			var opts []any
			if consolidated {
				opts = append(opts, WithConsolidated())
			}
			switch g.Rank() {
			case 0:
				for i := range rounds {
					td := New()
					require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, float64(i), 1<<16)))
					_, err := td.ISend(1, mpitest.As[SendOption](opts)...)
					require.NoError(t, err)
					runtime.GC()
				}
			case 1:
				ctx := mpitest.Ctx(t, 60*time.Second)
				td := New()
				require.NoError(t, td.Set(K("x"), tensor.Zeros(tensor.Float32, 1<<16)))
				if consolidated {
					var err error
					td, err = td.Consolidate()
					require.NoError(t, err)
				}
				for i := range rounds {
					_, err := td.Recv(0, mpitest.As[RecvOption](append(opts, WithContext(ctx)))...)
					require.NoError(t, err)
					x, err := td.Get(K("x"))
					require.NoError(t, err)
					require.Equal(t, float32(i), tensor.Get[float32](x, 1<<16-1))
				}
			}
			require.NoError(t, g.Barrier())
			runtime.GC()
		})
	}
}

// TestP2PStateAfterMemmapInPlace: MemmapInPlace replaces a TensorDict's
// tensors with mapped copies in the same entries; the Send/Recv state
// kept from before follows them (it skips its walk of the leaves only
// while no node was edited).
func TestP2PStateAfterMemmapInPlace(t *testing.T) {
	td := p2pTD(t)
	td.Unlock()
	s, err := p2pStateOf("test", td)
	require.NoError(t, err)
	before := s.leaves[0].t
	s.mu.Unlock()
	_, err = td.MemmapInPlace("")
	require.NoError(t, err)
	s, err = p2pStateOf("test", td)
	require.NoError(t, err)
	defer s.mu.Unlock()
	require.NotEmpty(t, s.leaves)
	assert.NotSame(t, before, s.leaves[0].t)
	for _, l := range s.leaves {
		got, err := td.Get(l.key)
		require.NoError(t, err)
		assert.Same(t, got, l.t, "%v", l.key)
	}
}

// TestRecvRepeatedHeader: the same header, received again and again into
// one TensorDict, is accepted each time with the same options, and refused
// with a lower WithMaxBytes, another mode or a changed receiving
// TensorDict; the receives after a refusal take it again.
func TestRecvRepeatedHeader(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td, _, total := consolidatedP2PTD(t)
	into := p2pTD(t)
	steps := []struct {
		name string
		opts []RecvOption
		grow bool  // add a leaf to the receiving TensorDict first
		want error // nil: received
	}{
		{name: "first", opts: []RecvOption{WithConsolidated()}},
		{name: "second", opts: []RecvOption{WithConsolidated()}},
		{name: "third", opts: []RecvOption{WithConsolidated()}},
		{name: "lower limit", opts: []RecvOption{WithConsolidated(), WithMaxBytes(int64(total) - 1)}, want: ErrLimit},
		{name: "after the limit", opts: []RecvOption{WithConsolidated()}},
		{name: "per leaf", opts: nil, want: ErrMismatch},
		{name: "after the mode", opts: []RecvOption{WithConsolidated()}},
		{name: "changed receiver", opts: []RecvOption{WithConsolidated()}, grow: true, want: ErrMismatch},
	}
	for i, st := range steps {
		if g.Rank() == 0 {
			fill(t, td, float64(i))
			require.NoError(t, td.Send(1, WithConsolidated()), st.name)
			continue
		}
		if st.grow {
			require.NoError(t, into.Set(K("extra"), tensor.Zeros(tensor.Float32, 3)))
		}
		fill(t, into, 99)
		_, err := into.Recv(0, append(st.opts, testCtx(t))...)
		if st.want != nil {
			require.ErrorIs(t, err, st.want, st.name)
			assert.True(t, into.EqScalar(99).All(), "%s: the refused transfer left the leaves alone", st.name)
			continue
		}
		require.NoError(t, err, st.name)
		assert.True(t, into.EqScalar(float64(i)).All(), st.name)
	}
}
