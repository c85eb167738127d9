// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// asyncTD returns the TensorDicts IAllReduce is tested on, every leaf
// filled with v: consolidated (one storage, the single-call path), and
// mixed (dtypes, a large leaf reduced on its own, small leaves in buckets,
// half precision through float32, a leaf that is not contiguous).
func asyncTD(t testing.TB, kind string, v float64) *TensorDict {
	t.Helper()
	td := New(4)
	require.NoError(t, td.Set(K("a"), collFull(t, tensor.Float32, v, 4, 3)))
	require.NoError(t, td.Set(K("n", "b"), collFull(t, tensor.Float32, v, 4)))
	if kind == "consolidated" {
		c, err := td.Consolidate()
		require.NoError(t, err)
		return c
	}
	require.NoError(t, td.Set(K("big"), collFull(t, tensor.Float64, v, 4, 1<<14)))
	require.NoError(t, td.Set(K("i"), collFull(t, tensor.Int32, v, 4, 2)))
	require.NoError(t, td.Set(K("h"), collFull(t, tensor.Float16, v, 4, 5)))
	require.NoError(t, td.Set(K("z"), collFull(t, tensor.Complex64, v, 4)))
	wide := collFull(t, tensor.Float32, v, 3, 4)
	tr, err := wide.Transpose(0, 1)
	require.NoError(t, err)
	require.False(t, tr.IsContiguous())
	require.NoError(t, td.Set(K("t"), tr))
	return td
}

func asyncCheck(t testing.TB, td *TensorDict, v float64, what string) {
	t.Helper()
	for _, k := range td.Keys(IncludeNested(), LeavesOnly()) {
		x, err := td.Get(k)
		require.NoError(t, err)
		collRequireAll(t, x, v, fmt.Sprintf("%s, key %v", what, k))
	}
}

// TestIAllReduce checks IAllReduce and IReduce against values computed
// here: each rank r contributes r+1, so the sum is n(n+1)/2, on both
// reduction paths, with Wait and with Test, two reductions in flight at
// once completed in reverse order, and a collective of another kind run
// while one is pending.
func TestIAllReduce(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	sum := float64(n * (n + 1) / 2)
	for _, kind := range []string{"consolidated", "mixed"} {
		mpitest.Run(t, kind, func(t *testing.T) {
			td := asyncTD(t, kind, float64(r+1))
			p, err := td.IAllReduce(ReduceSum)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			asyncCheck(t, td, sum, "IAllReduce sum")
			require.NoError(t, p.Wait(), "a second Wait")

			if kind == "consolidated" { // ReduceAvg refuses the mixed kind's integers
				avg := asyncTD(t, kind, float64(r+1))
				p, err = avg.IAllReduce(ReduceAvg)
				require.NoError(t, err)
				for {
					done, err := p.Test()
					require.NoError(t, err)
					if done {
						break
					}
				}
				asyncCheck(t, avg, sum/float64(n), "IAllReduce avg")
			}

			a, b := asyncTD(t, kind, float64(r+1)), asyncTD(t, kind, float64(2*(r+1)))
			pa, err := a.IAllReduce(ReduceSum)
			require.NoError(t, err)
			pb, err := b.IAllReduce(ReduceSum)
			require.NoError(t, err)
			var src *TensorDict
			if r == 0 {
				src = collSeed(t, 5)
			}
			got, err := src.Broadcast(0) // another collective while both are in flight
			require.NoError(t, err)
			collCheckSeed(t, got, 5, 0)
			require.NoError(t, pb.Wait())
			require.NoError(t, pa.Wait())
			asyncCheck(t, a, sum, "first of two in flight")
			asyncCheck(t, b, 2*sum, "second of two in flight")

			dst := n - 1
			red := asyncTD(t, kind, float64(r+1))
			p, err = red.IReduce(dst, ReduceSum)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			if r == dst {
				asyncCheck(t, red, sum, "IReduce at dst")
			} else {
				asyncCheck(t, red, float64(r+1), "IReduce elsewhere")
			}
			assert.Error(t, p.Cancel(), "a collective cannot be cancelled")
		})
	}
}

// TestIAllReduceRefused checks that what AllReduce refuses before moving
// anything, IAllReduce refuses at once on every rank: different
// structures and a leaf op does not apply to.
func TestIAllReduceRefused(t *testing.T) {
	g := mpitest.Need(t, 2)
	r := g.Rank()
	td := New(2)
	require.NoError(t, td.Set(K(fmt.Sprintf("k%d", r%2)), tensor.Full(tensor.Float32, 1, 2)))
	p, err := td.IAllReduce(ReduceSum)
	assert.Nil(t, p)
	assert.ErrorIs(t, err, ErrMismatch)

	b := New(2)
	require.NoError(t, b.Set(K("x"), tensor.Full(tensor.Float32, 1, 2)))
	p, err = b.IAllReduce(ReduceBitAnd)
	assert.Nil(t, p)
	require.Error(t, err)
	p, err = b.IAllReduce(ReduceSum) // the group still works
	require.NoError(t, err)
	require.NoError(t, p.Wait())
	asyncCheck(t, b, float64(g.Size()), "after the refusals")
}

// TestGatherAndStackInPlace checks Python's gather_and_stack semantics:
// dst's td of leading dimension Size-1 receives the other ranks' tds in
// rank order, skipping its own, for dst first and last; a td of the wrong
// shape on dst is an error on every rank.
func TestGatherAndStackInPlace(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	for _, dst := range []int{0, n - 1} {
		mpitest.Run(t, fmt.Sprintf("dst %d", dst), func(t *testing.T) {
			td := New(3)
			require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, float64(10*(r+1)), 3, 2)))
			require.NoError(t, td.Set(K("n", "i"), tensor.Full(tensor.Int64, float64(r+1), 3)))
			if r == dst {
				td = New(n-1, 3)
				require.NoError(t, td.Set(K("x"), tensor.Zeros(tensor.Float32, n-1, 3, 2)))
				require.NoError(t, td.Set(K("n", "i"), tensor.Zeros(tensor.Int64, n-1, 3)))
			}
			require.NoError(t, td.GatherAndStackInPlace(dst))
			if r != dst {
				x, _ := td.Get(K("x"))
				collRequireAll(t, x, float64(10*(r+1)), "a sender's td")
				return
			}
			for i := range n - 1 {
				from := i
				if i >= dst {
					from = i + 1
				}
				row, err := td.Index(i)
				require.NoError(t, err)
				x, _ := row.Get(K("x"))
				collRequireAll(t, x, float64(10*(from+1)), fmt.Sprintf("entry %d", i))
				y, _ := row.Get(K("n", "i"))
				collRequireAll(t, y, float64(from+1), fmt.Sprintf("entry %d", i))
			}
		})
	}
	mpitest.Run(t, "wrong shape on dst", func(t *testing.T) {
		td := New(3)
		require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, 1, 3)))
		// dst's leading dimension is 3: not Size-1, or (at np 4) entries
		// whose structure is not the senders'.
		err := td.GatherAndStackInPlace(0)
		require.Error(t, err)
		if r == 0 && n-1 != 3 {
			assert.Contains(t, err.Error(), "leading dimension")
		}
	})
}

// TestIBroadcast checks IBroadcast against Broadcast's results: a
// TensorDict of several messages (complete after Wait), one small enough
// for the single first message (complete at once), and the reuse of the
// receiver's storage with WithConsolidated; and that a receiver's refusal
// is returned at once on every rank.
func TestIBroadcast(t *testing.T) {
	g := mpitest.Need(t, 2)
	r := g.Rank()
	for _, tc := range []struct {
		name string
		rows int
	}{{"several messages", 1 << 14}, {"one message", 2}} {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			var src *TensorDict
			if r == 0 {
				src = New(tc.rows)
				require.NoError(t, src.Set(K("x"), tensor.Full(tensor.Float32, 3, tc.rows, 4)))
				require.NoError(t, src.Set(K("n", "y"), tensor.Full(tensor.Int64, 4, tc.rows)))
			}
			got, p, err := src.IBroadcast(0)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.NoError(t, p.Wait())
			assert.Equal(t, []int{tc.rows}, got.BatchSize())
			x, err := got.Get(K("x"))
			require.NoError(t, err)
			collRequireAll(t, x, 3, "x")
			y, err := got.Get(K("n", "y"))
			require.NoError(t, err)
			collRequireAll(t, y, 4, "n.y")

			// The steady state: into the previous result's storage.
			if r == 0 {
				xs, _ := src.Get(K("x"))
				require.NoError(t, xs.Fill(5))
			}
			me := src
			if r != 0 {
				me = got
			}
			again, p, err := me.IBroadcast(0, WithConsolidated())
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			x, err = again.Get(K("x"))
			require.NoError(t, err)
			collRequireAll(t, x, 5, "x after the second IBroadcast")
		})
	}
	mpitest.Run(t, "refused", func(t *testing.T) {
		var src *TensorDict
		if r == 0 {
			src = New(1 << 14)
			require.NoError(t, src.Set(K("x"), tensor.Full(tensor.Float32, 1, 1<<14, 4)))
		}
		_, p, err := src.IBroadcast(0, WithMaxBytes(1<<10))
		assert.Nil(t, p)
		require.Error(t, err)
	})
}

// TestIAllGather checks IAllGather against rankTD's independent values, a
// second IAllGather in flight with it, and the refusal of an out slice of
// the wrong length on one rank (an error on every rank).
func TestIAllGather(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	a, b := make([]*TensorDict, n), make([]*TensorDict, n)
	pa, err := rankTD(t, r).IAllGather(a)
	require.NoError(t, err)
	pb, err := rankTD(t, r).IAllGather(b)
	require.NoError(t, err)
	require.NoError(t, pb.Wait())
	require.NoError(t, pa.Wait())
	for i := range n {
		checkRankTD(t, a[i], i)
		checkRankTD(t, b[i], i)
	}
	out := make([]*TensorDict, n)
	if r == n-1 {
		out = out[:n-1]
	}
	p, err := rankTD(t, r).IAllGather(out)
	assert.Nil(t, p)
	require.Error(t, err)
}
