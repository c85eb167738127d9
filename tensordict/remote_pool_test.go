// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/tensor"
)

// vmRSS returns this process's resident set size in bytes, or skips t
// where /proc/self/status has none.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	kb := mpitest.ProcStatus("VmRSS")
	if kb < 0 {
		t.Skip("SKIPPED: no VmRSS in /proc/self/status to read the resident set from")
	}
	return kb << 10
}

// TestFromRemoteInitSoak receives 200 fresh TensorDicts of 64 MiB in a
// loop, as a user writes it: no WithAllocator, each result kept for one
// more round (so the pool must not hand out memory that is still
// reachable), then dropped or released, every other round each. The
// resident set of the receiver stays within its size before the loop plus
// 6 x 64 MiB (two results alive, two regions waiting in the pool, and the
// runtime's slack), and the receive pool serves most rounds with memory
// that came back.
func TestFromRemoteInitSoak(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n = 64 << 20
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	mpitest.Run(t, "fresh 64 MiB receives", func(t *testing.T) {
		if g.Rank() > 1 {
			return
		}
		if g.Rank() == 0 {
			big := tensor.Zeros(tensor.Float64, n/8)
			d, err := tensor.Data[float64](big)
			require.NoError(t, err)
			td := New()
			require.NoError(t, td.Set(K("big"), big))
			for round := range rounds {
				d[0], d[len(d)-1] = float64(round), float64(-round)
				require.NoError(t, td.InitRemote(1), "round %d", round)
			}
			return
		}
		before := mem.Stats()
		base, peak := vmRSS(t), int64(0)
		var prev *TensorDict
		check := func(td *TensorDict, round int) bool {
			x, err := td.Get(K("big"))
			if !assert.NoError(t, err, "round %d", round) {
				return false
			}
			d, err := tensor.Data[float64](x)
			return assert.NoError(t, err, "round %d", round) &&
				assert.Len(t, d, n/8, "round %d", round) &&
				assert.Equal(t, []float64{float64(round), float64(-round)}, []float64{d[0], d[len(d)-1]}, "round %d", round)
		}
		for round := range rounds {
			got, err := FromRemoteInit(0, testCtx(t))
			require.NoError(t, err, "round %d", round)
			ok := check(got, round)
			if prev != nil {
				// The previous result is still reachable: its memory
				// must not have been reused for this one.
				ok = check(prev, round-1) && ok
				if round%2 == 0 {
					require.NoError(t, prev.Release())
				}
			}
			if !ok {
				t.Fatalf("round %d: a result changed under its owner", round)
			}
			prev = got
			peak = max(peak, vmRSS(t))
		}
		after := mem.Stats()
		t.Logf("resident set %d MiB before, peak %d MiB; pool: %d fresh, %d reused, %d nudges",
			base>>20, peak>>20, after.Fresh-before.Fresh, after.Reused-before.Reused, after.Nudges-before.Nudges)
		assert.LessOrEqual(t, peak, base+6*n, "resident set grew past 6 x 64 MiB over its size before the loop")
		assert.GreaterOrEqual(t, after.Reused-before.Reused, int64(rounds/2), "the receive pool reused memory in fewer than half the rounds")
	})
}

// The results of AllGather, Scatter and a receive from a PyTorch rank
// (WithTorch) take their memory from the receive pool too: a storage of
// at least mem.PoolMin is the pool's (Reusable, so that Release hands it
// back), and holds what the ranks sent.
func TestResultsFromPool(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n = mem.PoolMin // bytes per rank
	mine := func(r int) *TensorDict {
		td := New()
		require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float64, float64(r+1), n/8)))
		return td
	}
	checkFrom := func(t *testing.T, td *TensorDict, r int) {
		t.Helper()
		x, err := td.Get(K("x"))
		require.NoError(t, err)
		assert.True(t, tensorx.Reusable(x.Storage()), "the storage of rank %d's TensorDict is not the receive pool's", r)
		assert.Equal(t, float64(r+1)*float64(n/8), x.Sum(), "rank %d's TensorDict", r)
	}
	mpitest.Run(t, "AllGather", func(t *testing.T) {
		before := mem.Stats()
		out, err := mine(g.Rank()).AllGather(testCtx(t))
		require.NoError(t, err)
		for r, td := range out {
			checkFrom(t, td, r)
		}
		after := mem.Stats()
		assert.Equal(t, int64(1), after.Fresh+after.Reused-before.Fresh-before.Reused, "one region for every rank's block")
		require.NoError(t, out[0].Release())
	})
	mpitest.Run(t, "Scatter", func(t *testing.T) {
		var tds []*TensorDict
		if g.Rank() == 0 {
			for r := range g.Size() {
				tds = append(tds, mine(r))
			}
		}
		got, err := New().Scatter(0, tds, testCtx(t))
		require.NoError(t, err)
		checkFrom(t, got, g.Rank())
		require.NoError(t, got.Release())
	})
	mpitest.Run(t, "torch", func(t *testing.T) {
		switch g.Rank() {
		case 0:
			require.NoError(t, mine(0).InitRemote(1, WithTorch(), testCtx(t)))
		case 1:
			got, err := FromRemoteInit(0, WithTorch(), testCtx(t))
			require.NoError(t, err)
			checkFrom(t, got, 0)
		}
	})
}

// A released result whose bytes only tdmpi read (received, passed on with
// InitRemote) goes back to the receive pool at once; one whose bytes the
// caller read (Data) is left to the collector. The values arrive intact either
// way, also into a region given back and reused. The same in broadcast mode,
// where every other rank receives both broadcasts.
func TestReleaseGivesRegionBack(t *testing.T) {
	g := mpitest.Need(t, 2)
	cases := []struct {
		name  string
		n     int  // bytes of the TensorDict's one leaf
		bcast bool // WithBroadcast: every rank takes part, rank 1 passes its result on to all
		read  bool // rank 1 reads the result's values before releasing it
		given bool
	}{
		{"passed on", 256 << 10, false, false, true},
		{"read", 256 << 10, false, true, false},
		{"broadcast/passed on", 256 << 10, true, false, true},
		{"broadcast/read", 256 << 10, true, true, false},
		// The storage travels in the frame, which the receivers copy it out of.
		{"broadcast/inline/passed on", 32 << 10, true, false, true},
		{"broadcast/inline/read", 32 << 10, true, true, false},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			var opts []RemoteOption
			if c.bcast {
				opts = append(opts, WithBroadcast())
			} else if g.Rank() > 1 {
				return
			}
			switch g.Rank() {
			case 0:
				for round := range 4 {
					x := tensor.Full(tensor.Float64, float64(round), c.n/8)
					td := New()
					require.NoError(t, td.Set(K("x"), x))
					require.NoError(t, td.InitRemote(1, opts...))
					back, err := FromRemoteInit(1, opts...)
					require.NoError(t, err)
					got, err := back.Get(K("x"))
					require.NoError(t, err)
					v, err := tensor.Data[float64](got)
					require.NoError(t, err)
					require.Equal(t, float64(round), v[0], "round %d", round)
					require.Equal(t, float64(round), v[len(v)-1], "round %d", round)
				}
			case 1:
				for round := range 4 {
					got, err := FromRemoteInit(0, opts...)
					require.NoError(t, err)
					if c.read {
						x, err := got.Get(K("x"))
						require.NoError(t, err)
						v, err := tensor.Data[float64](x)
						require.NoError(t, err)
						require.Equal(t, float64(round), v[0])
					}
					require.NoError(t, got.InitRemote(0, opts...), "round %d", round) // rank 0 checks the values
					given := releaseGivesBack(t, got)
					// The first result of a structure is built from the
					// metadata, not from a template, and InitRemote lays it
					// out again (planSend), reading its storage as user code
					// would: round 0 of the first case is not given back.
					if round > 0 {
						assert.Equal(t, c.given, given, "round %d: given back", round)
					}
				}
			default: // broadcast: receives both, releases them unread
				for range 4 {
					for src := range 2 {
						got, err := FromRemoteInit(src, opts...)
						require.NoError(t, err)
						require.NoError(t, got.Release())
					}
				}
			}
		})
	}
}

// A Broadcast result that nobody read goes back to the receive pool at its
// release, as a FromRemoteInit result does; one whose values were read, or
// one of IBroadcast (which MPI writes after the call), is left to the
// collector.
func TestBroadcastResultGivenBack(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n = 256 << 10
	cases := []struct {
		name  string
		async bool // IBroadcast, then Wait
		read  bool // the receivers read the result's values before releasing it
		given bool
	}{
		{"unread", false, false, true},
		{"read", false, true, false},
		{"IBroadcast", true, false, false},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			for round := range 3 {
				var td *TensorDict
				if g.Rank() == 0 {
					td = New()
					require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float64, float64(round), n/8)))
				}
				var got *TensorDict
				var err error
				if c.async {
					var p *Pending
					got, p, err = td.IBroadcast(0)
					require.NoError(t, err)
					require.NoError(t, p.Wait())
				} else {
					got, err = td.Broadcast(0)
					require.NoError(t, err)
				}
				if g.Rank() == 0 {
					continue
				}
				if c.read {
					x, err := got.Get(K("x"))
					require.NoError(t, err)
					v, err := tensor.Data[float64](x)
					require.NoError(t, err)
					require.Equal(t, float64(round), v[len(v)-1])
				}
				assert.Equal(t, c.given, releaseGivesBack(t, got), "round %d: given back", round)
			}
		})
	}
}

// releaseGivesBack releases td and reports whether that gave one region
// back to the receive pool at once (mem.GiveBack).
func releaseGivesBack(t *testing.T, td *TensorDict) bool {
	t.Helper()
	before := mem.Stats().GivenBack
	require.NoError(t, td.Release())
	return mem.Stats().GivenBack == before+1
}
