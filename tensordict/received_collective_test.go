// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// recvSeedKeys are the leaves of recvSeed, and recvSeedBase their values
// (row-major, batch dimensions [1 2] included), each scaled by a rank's
// factor.
var (
	recvSeedKeys = []Key{K("a", "b"), K("c"), K("d", "e", "f")}
	recvSeedBase = [][]float32{{1, 2}, {3, 4}, {5, 6, 7, 8}}
)

// recvSeed builds the seed TensorDict of tensordict's init_remote
// documentation (a nested key, a memory-mapped leaf, expanded to batch
// size [1 2]), its values recvSeedBase times v, made contiguous and
// consolidated as a received result is: the reductions then reduce the
// storages of both in place, in one call.
func recvSeed(t testing.TB, v float32) *TensorDict {
	t.Helper()
	leaf := func(i int, shape ...int) *tensor.Tensor {
		s := make([]float32, len(recvSeedBase[i]))
		for j, x := range recvSeedBase[i] {
			s[j] = x * v
		}
		x, err := tensor.FromSlice(s, shape...)
		require.NoError(t, err)
		return x
	}
	f, err := memmap.FromTensor(leaf(2, 2, 2), "")
	require.NoError(t, err)
	td := New(2)
	require.NoError(t, errors.Join(
		td.Set(K("a", "b"), leaf(0, 2)),
		td.Set(K("c"), leaf(1, 2)),
		td.Set(K("d", "e", "f"), f),
	))
	td, err = td.Expand(1, 2)
	require.NoError(t, err)
	td, err = td.Contiguous().Consolidate()
	require.NoError(t, err)
	return td
}

// recvCheck fails unless td has recvSeed's structure, batch dimensions
// batch before [1 2], and values recvSeedBase times want[i] in its i-th
// slice along the first of batch (times want[0] when batch is empty).
func recvCheck(t testing.TB, td *TensorDict, batch []int, want []float32, msg string) {
	t.Helper()
	require.NotNil(t, td, msg)
	require.Equal(t, append(append([]int(nil), batch...), 1, 2), td.BatchSize(), msg)
	for i, k := range recvSeedKeys {
		x, err := td.Get(k)
		require.NoError(t, err, "%s: %v", msg, k)
		got, err := tensor.Data[float32](x.Contiguous())
		require.NoError(t, err, "%s: %v", msg, k)
		n := len(recvSeedBase[i])
		require.Len(t, got, n*len(want), "%s: %v", msg, k)
		for s, w := range want {
			for j, b := range recvSeedBase[i] {
				require.Equal(t, b*w, got[s*n+j], "%s: %v slice %d element %d", msg, k, s, j)
			}
		}
	}
}

// recvSmall returns this rank's TensorDict of a test on received results:
// rank 0 builds recvSeed with values times 1 and sends it to every other
// rank with InitRemote, in rank order; rank r receives it with
// FromRemoteInit and scales it by r+1 in place, so that rank r holds
// recvSeedBase times r+1 in a small received result, whose storage shares
// one allocation with its tree (a template copy, see template.go).
func recvSmall(t *testing.T, g *group.Group) *TensorDict {
	t.Helper()
	r := g.Rank()
	if r == 0 {
		td := recvSeed(t, 1)
		for dst := 1; dst < g.Size(); dst++ {
			require.NoError(t, td.InitRemote(dst), "InitRemote to rank %d", dst)
		}
		return td
	}
	got, err := FromRemoteInit(0)
	require.NoError(t, err)
	recvCheck(t, got, nil, []float32{1}, "received")
	require.NoError(t, got.MulScalarInPlace(float64(r+1)))
	return got
}

// recvRun is mpitest.Run of f, with a panic in f a failure of the test:
// the rank that panicked then says it failed (mpitest loses the test's log
// when it ends a job whose other ranks wait in a collective, and a panic's
// message with it).
func recvRun(t *testing.T, name string, f func(t *testing.T)) {
	mpitest.Run(t, name, func(t *testing.T) {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic: %v", p)
			}
		}()
		f(t)
	})
}

// TestCollectivesOnReceivedResult runs every collective on small
// TensorDicts received with FromRemoteInit, whose storage shares one Go
// allocation with their tree (pointers included): passing that storage to
// MPI as a C void * made cgo's pointer check walk the whole allocation and
// panic ("argument of cgo function has Go pointer to unpinned Go
// pointer"). Rank r's TensorDict holds recvSeedBase times r+1.
func TestCollectivesOnReceivedResult(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	sum := float32(n * (n + 1) / 2)
	ranks := make([]float32, n) // rank i's factor
	for i := range ranks {
		ranks[i] = float32(i + 1)
	}
	recvRun(t, "AllReduce", func(t *testing.T) {
		// Three receives in a row, each a copy of one template.
		for range 3 {
			td := recvSmall(t, g)
			require.NoError(t, td.AllReduce(ReduceSum))
			recvCheck(t, td, nil, []float32{sum}, "AllReduce sum")
		}
	})
	recvRun(t, "IAllReduce", func(t *testing.T) {
		td := recvSmall(t, g)
		p, err := td.IAllReduce(ReduceSum)
		require.NoError(t, err)
		require.NoError(t, p.Wait())
		recvCheck(t, td, nil, []float32{sum}, "IAllReduce sum")
	})
	for _, root := range []int{0, n - 1} {
		recvRun(t, fmt.Sprintf("Reduce/dst%d", root), func(t *testing.T) {
			td := recvSmall(t, g)
			require.NoError(t, td.Reduce(root, ReduceMax))
			want := float32(r + 1) // unchanged off dst
			if r == root {
				want = float32(n)
			}
			recvCheck(t, td, nil, []float32{want}, "Reduce max")
		})
		recvRun(t, fmt.Sprintf("IReduce/dst%d", root), func(t *testing.T) {
			td := recvSmall(t, g)
			p, err := td.IReduce(root, ReduceSum)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			want := float32(r + 1)
			if r == root {
				want = sum
			}
			recvCheck(t, td, nil, []float32{want}, "IReduce sum")
		})
		recvRun(t, fmt.Sprintf("Broadcast/src%d", root), func(t *testing.T) {
			td := recvSmall(t, g)
			got, err := td.Broadcast(root)
			require.NoError(t, err)
			recvCheck(t, got, nil, []float32{float32(root + 1)}, "Broadcast")
		})
		recvRun(t, fmt.Sprintf("Scatter/src%d", root), func(t *testing.T) {
			td := recvSmall(t, g)
			var tds []*TensorDict
			if r == root {
				for range n {
					tds = append(tds, td)
				}
			}
			got, err := td.Scatter(root, tds)
			require.NoError(t, err)
			recvCheck(t, got, nil, []float32{float32(root + 1)}, "Scatter")
		})
		recvRun(t, fmt.Sprintf("GatherAndStack/dst%d", root), func(t *testing.T) {
			td := recvSmall(t, g)
			got, err := td.GatherAndStack(root)
			require.NoError(t, err)
			if r != root {
				require.Nil(t, got)
				return
			}
			recvCheck(t, got, []int{n}, ranks, "GatherAndStack")
		})
	}
	recvRun(t, "AllGather", func(t *testing.T) {
		td := recvSmall(t, g)
		all, err := td.AllGather()
		require.NoError(t, err)
		require.Len(t, all, n)
		for i, got := range all {
			recvCheck(t, got, nil, ranks[i:i+1], fmt.Sprintf("AllGather rank %d", i))
		}
		recvCheck(t, td, nil, ranks[r:r+1], "AllGather source")
	})
}
