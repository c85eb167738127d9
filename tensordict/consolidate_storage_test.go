package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestConsolidateIntoStorage: the result views the given storage, so its
// Release is seen (issue 12 item 17).
func TestConsolidateIntoStorage(t *testing.T) {
	mpitest.Need(t, 1)
	td := alignTD(t)
	_, total, err := Layout(td)
	require.NoError(t, err)
	st, err := tensor.NewOffHeapStorage(total)
	if err != nil {
		t.Skipf("SKIP: no off-heap storage on this platform: %v", err)
	}
	c, err := td.ConsolidateIntoStorage(st)
	require.NoError(t, err)
	requireAlignValues(t, c)
	assert.Same(t, st, c.ConsolidatedStorage())

	require.NoError(t, st.Release())
	assert.False(t, c.IsConsolidated())
	x, err := c.Get(K("z"))
	require.NoError(t, err)
	_, err = x.Bytes()
	require.ErrorIs(t, err, tensor.ErrReleased)
	_, err = c.Consolidate()
	require.ErrorIs(t, err, tensor.ErrReleased)

	_, err = td.ConsolidateIntoStorage(st)
	require.ErrorIs(t, err, tensor.ErrReleased)
	_, err = td.ConsolidateIntoStorage(nil)
	require.Error(t, err)
	_, err = td.ConsolidateIntoStorage(tensor.NewStorage(total + 8))
	require.ErrorContains(t, err, "layout needs")
}

// TestBroadcastIntoReleasedStorage is the crash of issue 12 item 17: a
// receiver's TensorDict consolidated into off-heap memory that it then
// released. Receiving into it crashed inside Open MPI (SIGSEGV); the
// receive now sees the release. With WithConsolidated the receiver gets a
// new TensorDict (its own no longer has a consolidated storage to reuse),
// and the released leaves are never touched.
func TestBroadcastIntoReleasedStorage(t *testing.T) {
	g := mpitest.Need(t, 2)
	src := alignTD(t)
	var td *TensorDict
	var st *tensor.Storage
	if g.Rank() != 0 {
		_, total, err := Layout(src)
		require.NoError(t, err)
		st, err = tensor.NewOffHeapStorage(total)
		if err != nil {
			t.Skipf("SKIP: no off-heap storage: %v", err)
		}
		td, err = zeroedAlign(t).ConsolidateIntoStorage(st)
		require.NoError(t, err)
		require.NoError(t, st.Release())
	} else {
		td = src
	}
	got, err := td.Broadcast(0, WithConsolidated(), testCtx(t))
	require.NoError(t, err)
	requireAlignValues(t, got)
	if g.Rank() != 0 {
		assert.NotSame(t, td, got, "a new TensorDict, not the released one")
		_, err := mustGet(t, td, K("z")).Bytes()
		require.ErrorIs(t, err, tensor.ErrReleased, "the released leaves stay released")
	}
}

// zeroedAlign is alignTD with zeros in every leaf.
func zeroedAlign(t *testing.T) *TensorDict {
	td := alignTD(t)
	for _, it := range td.Items(IncludeNested(), LeavesOnly()) {
		require.NoError(t, td.Set(it.Key, tensor.Zeros(it.Tensor.DType(), it.Tensor.Shape()...)))
	}
	return td
}
