package tensordict

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

func TestInitRemoteNonTensorStack(t *testing.T) {
	g := mpitest.Need(t, 2)
	switch g.Rank() {
	case 0:
		require.NoError(t, stackTree(t).InitRemote(1))
	case 1:
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		sameNonTensors(t, stackTree(t), got)
		assert.True(t, got.IsConsolidated())
		row, err := got.Index(1)
		require.NoError(t, err)
		v, err := row.GetNonTensor(K("rows"))
		require.NoError(t, err)
		assert.Equal(t, 1.5, v, "an indexed row gives back its one value")
	}
}

func TestInitRemoteBroadcastNonTensorStack(t *testing.T) {
	g := mpitest.Need(t, 2)
	root := g.Size() - 1
	if g.Rank() == root {
		require.NoError(t, stackTree(t).InitRemote(-1, WithBroadcast()))
		return
	}
	got, err := FromRemoteInit(root, WithBroadcast(), testCtx(t))
	require.NoError(t, err)
	sameNonTensors(t, stackTree(t), got)
}

// rankStackTD is rank r's TensorDict of batch size [2]: a leaf, "rank"
// (differs between ranks), "same" (equal on every rank) and "pair", a
// stack of its own.
func rankStackTD(t testing.TB, r int) *TensorDict {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, float64(r), 2)))
	require.NoError(t, td.SetNonTensor(K("rank"), fmt.Sprintf("rank %d", r)))
	require.NoError(t, td.SetNonTensor(K("same"), "all"))
	require.NoError(t, td.SetNonTensor(K("pair"), mustStack(t, strs(fmt.Sprintf("%d-a", r), fmt.Sprintf("%d-b", r)), 2)))
	return td
}

// checkRankStack checks got, the stack along dimension 0 of every rank's
// rankStackTD (n ranks).
func checkRankStack(t *testing.T, got *TensorDict, n int) {
	t.Helper()
	assert.Equal(t, []int{n, 2}, got.BatchSize())
	var rank, pair []any
	for r := range n {
		rank = append(rank, fmt.Sprintf("rank %d", r), fmt.Sprintf("rank %d", r))
		pair = append(pair, fmt.Sprintf("%d-a", r), fmt.Sprintf("%d-b", r))
	}
	assert.Equal(t, rank, elements(t, got, "rank"))
	assert.Equal(t, pair, elements(t, got, "pair"))
	same, err := got.GetNonTensor(K("same"))
	require.NoError(t, err)
	assert.Equal(t, "all", same, "values equal on every rank stay one value")
	last, err := got.Index(n - 1)
	require.NoError(t, err)
	v, err := last.GetNonTensor(K("rank"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("rank %d", n-1), v)
}

func TestCollectiveNonTensorStack(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	td := rankStackTD(t, r)
	mpitest.Run(t, "AllGather", func(t *testing.T) {
		all, err := td.AllGather()
		require.NoError(t, err)
		require.Len(t, all, n)
		for i, got := range all {
			v, err := got.GetNonTensor(K("rank"))
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("rank %d", i), v)
			p, err := got.GetNonTensor(K("pair"))
			require.NoError(t, err)
			assert.Equal(t, mustStack(t, strs(fmt.Sprintf("%d-a", i), fmt.Sprintf("%d-b", i)), 2), p)
		}
		st, err := Stack(all, 0)
		require.NoError(t, err)
		checkRankStack(t, st, n)
	})
	for _, dst := range []int{0, n - 1} {
		mpitest.Run(t, fmt.Sprintf("GatherAndStack/dst%d", dst), func(t *testing.T) {
			got, err := td.GatherAndStack(dst)
			require.NoError(t, err)
			if r != dst {
				assert.Nil(t, got)
				return
			}
			checkRankStack(t, got, n)
		})
	}
	mpitest.Run(t, "Broadcast", func(t *testing.T) {
		got, err := td.Broadcast(0)
		require.NoError(t, err)
		p, err := got.GetNonTensor(K("pair"))
		require.NoError(t, err)
		assert.Equal(t, mustStack(t, strs("0-a", "0-b"), 2), p)
	})
}
