// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// consolidatedOffHeap returns a TensorDict of one zero leaf like src's,
// consolidated with ConsolidateInto into the bytes of a new off-heap
// storage, and that storage.
func consolidatedOffHeap(t *testing.T, src *TensorDict) (*TensorDict, *tensor.Storage) {
	t.Helper()
	_, total, err := Layout(src)
	require.NoError(t, err)
	st, err := tensor.NewOffHeapStorage(total)
	require.NoError(t, err)
	into, err := New().setLeaf(t, tensor.Zeros(tensor.Float64, holdElems)).ConsolidateInto(st.Bytes())
	require.NoError(t, err)
	return into, st
}

// TestConsolidateIntoReleasedOffHeap is issue 41 item 11: a TensorDict
// consolidated with ConsolidateInto into the bytes of an off-heap storage
// that is then released, followed by a Broadcast into it. The result of
// ConsolidateInto wrapped the bytes in a new heap storage that nothing tied
// to the off-heap one, so the Broadcast wrote into unmapped memory (SIGSEGV
// under Open MPI, a UCX abort under MPICH). Its storage now refers to the
// off-heap storage: once that is released, the result's leaves report
// tensor.ErrReleased, a Broadcast does not receive into it, and a transfer
// under way holds the off-heap memory until it ends.
func TestConsolidateIntoReleasedOffHeap(t *testing.T) {
	g := mpitest.Need(t, 2)
	src := New().setLeaf(t, tensor.Full(tensor.Float64, 3, holdElems))
	ctx := func(t *testing.T) CollectiveOption { return WithContext(mpitest.Ctx(t, 60*time.Second)) }
	later := func(t *testing.T) {
		t.Helper()
		got, err := src.Broadcast(0, ctx(t))
		require.NoError(t, err, "a later Broadcast works")
		assert.True(t, got.EqScalar(3).All())
	}

	mpitest.Run(t, "receivers released", func(t *testing.T) {
		into, st := consolidatedOffHeap(t, src)
		td := src
		if g.Rank() != 0 {
			td = into
			require.NoError(t, st.Release())
			assert.False(t, into.IsConsolidated(), "its storage is released with the off-heap one")
			_, err := mustGet(t, into, K("x")).Bytes()
			require.ErrorIs(t, err, tensor.ErrReleased)
			require.ErrorIs(t, into.Send(0, WithTag(90)), tensor.ErrReleased, "not sent")
		}
		got, err := td.Broadcast(0, WithConsolidated(), ctx(t))
		require.NoError(t, err)
		assert.True(t, got.EqScalar(3).All())
		if g.Rank() != 0 {
			assert.NotSame(t, into, got, "a new TensorDict, not the released one")
		} else {
			require.NoError(t, st.Release())
		}
		later(t)
	})

	mpitest.Run(t, "root released", func(t *testing.T) {
		into, st := consolidatedOffHeap(t, src)
		require.NoError(t, into.Fill(3))
		require.NoError(t, st.Release())
		var td *TensorDict
		if g.Rank() == 0 {
			td = into
		}
		_, err := td.Broadcast(0, WithConsolidated(), ctx(t))
		require.Error(t, err, "every rank fails")
		if g.Rank() == 0 {
			require.ErrorIs(t, err, tensor.ErrReleased)
		}
		later(t)
	})

	mpitest.Run(t, "released while pending", func(t *testing.T) {
		into, st := consolidatedOffHeap(t, src)
		// The receivers' TensorDict has the layout the source sends: the
		// storage goes straight into the off-heap memory.
		_, err := into.Broadcast(0, WithConsolidated(), ctx(t))
		require.NoError(t, err)
		td := src
		if g.Rank() != 0 {
			td = into
		}
		got, p, err := td.IBroadcast(0, WithConsolidated(), ctx(t))
		require.NoError(t, err)
		var y *tensor.Tensor
		if g.Rank() != 0 {
			require.NoError(t, st.Release(), "a release while the IBroadcast is pending reports success")
			y = offHeapLeaf(t, 2) // where the freed memory would be reused
			defer func() { assert.NoError(t, y.Storage().Release()) }()
		}
		require.NoError(t, p.Wait())
		if y != nil {
			assert.True(t, New().setLeaf(t, y).EqScalar(2).All(), "a later allocation is not written by MPI")
		} else {
			require.NoError(t, st.Release())
		}
		if g.Rank() == 0 {
			assert.True(t, got.EqScalar(3).All())
		}
		later(t)
	})
}

// TestOverReleasedExternalBytes: TensorDicts over the bytes of an off-heap
// storage or a memory map, made by ConsolidateInto or by FromConsolidated
// over tensor.StorageOf of them, see the release (or Close) of that
// storage: their leaves report tensor.ErrReleased instead of touching
// unmapped memory (issue 41 item 11).
func TestOverReleasedExternalBytes(t *testing.T) {
	mpitest.Need(t, 1)
	src := alignTD(t)
	_, total, err := Layout(src)
	require.NoError(t, err)
	c, err := src.Consolidate()
	require.NoError(t, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	for _, ext := range []struct {
		name    string
		make    func(t *testing.T) *tensor.Tensor
		release func(x *tensor.Tensor) error
	}{
		{"off-heap", func(t *testing.T) *tensor.Tensor {
			x, err := tensor.EmptyOffHeap(tensor.Uint8, total)
			require.NoError(t, err)
			return x
		}, func(x *tensor.Tensor) error { return x.Storage().Release() }},
		{"memmap", func(t *testing.T) *tensor.Tensor {
			x, err := memmap.Empty(tensor.Uint8, filepath.Join(t.TempDir(), "x"), []int{total})
			require.NoError(t, err)
			return x
		}, memmap.Close},
	} {
		for _, build := range []struct {
			name string
			f    func(t *testing.T, b []byte) *TensorDict
		}{
			{"ConsolidateInto", func(t *testing.T, b []byte) *TensorDict {
				td, err := src.ConsolidateInto(b)
				require.NoError(t, err)
				return td
			}},
			{"FromConsolidated", func(t *testing.T, b []byte) *TensorDict {
				copy(b, mustBytes(t, c.ConsolidatedStorage()))
				td, err := FromConsolidated(tensor.StorageOf(b), meta)
				require.NoError(t, err)
				return td
			}},
		} {
			t.Run(ext.name+"/"+build.name, func(t *testing.T) {
				x := ext.make(t)
				b, err := x.Bytes()
				require.NoError(t, err)
				td := build.f(t, b)
				requireAlignValues(t, td)
				require.NoError(t, ext.release(x))
				assert.False(t, td.IsConsolidated())
				for _, it := range td.Items(IncludeNested(), LeavesOnly()) {
					_, err := it.Tensor.Bytes()
					require.ErrorIs(t, err, tensor.ErrReleased, "key %v", it.Key)
				}
				_, err = td.Consolidate()
				require.ErrorIs(t, err, tensor.ErrReleased)
			})
		}
	}
}

// mustBytes returns the bytes of st.
func mustBytes(t *testing.T, st *tensor.Storage) []byte {
	t.Helper()
	require.NotNil(t, st)
	return st.Bytes()
}
