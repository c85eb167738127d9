// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// planSeed returns a TensorDict of three float32 leaves, one nested, and
// a non-tensor value.
func planSeed(t *testing.T) *TensorDict {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("b"), tensor.Full(tensor.Float32, 1, 2, 3)))
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 1, 2)))
	require.NoError(t, td.Set(K("n", "c"), tensor.Full(tensor.Float32, 1, 2, 2)))
	require.NoError(t, td.SetNonTensor(K("label"), "x"))
	return td
}

// planKeys returns the keys of p's leaves, in p's order.
func planKeys(p *leafPlan) []string {
	var ks []string
	for _, it := range p.leaves {
		ks = append(ks, it.Key.String())
	}
	return ks
}

// TestLeafPlan checks that a TensorDict's plan is reused while its tree is
// unedited and made anew after each kind of change, and that the new one
// describes the tree as it is.
func TestLeafPlan(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, td *TensorDict)
		keys   []string // of the new plan, nil: the same as before
		same   bool     // the plan is the one made before the change
	}{
		{name: "nothing", change: func(*testing.T, *TensorDict) {}, same: true},
		{name: "values in place", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.SetInPlace(K("a"), tensor.Full(tensor.Float32, 5, 2)))
		}, same: true},
		{name: "non-tensor value", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.SetNonTensor(K("label"), "y"))
		}},
		{name: "leaf replaced", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 7, 2)))
		}},
		{name: "leaf added", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.Set(K("aa"), tensor.Full(tensor.Int64, 1, 2)))
		}, keys: []string{"a", "aa", "b", "n.c"}},
		{name: "leaf deleted", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.Del(K("b")))
		}, keys: []string{"a", "n.c"}},
		{name: "nested leaf replaced", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.Set(K("n", "c"), tensor.Full(tensor.Float32, 1, 2, 5)))
		}},
		{name: "nested node replaced", change: func(t *testing.T, td *TensorDict) {
			sub := New(2)
			require.NoError(t, sub.Set(K("d"), tensor.Full(tensor.Float32, 1, 2)))
			require.NoError(t, td.SetTD(K("n"), sub))
		}, keys: []string{"a", "b", "n.d"}},
		{name: "batch size", change: func(t *testing.T, td *TensorDict) {
			require.NoError(t, td.SetBatchSize())
		}},
		{name: "memory-mapped in place", change: func(t *testing.T, td *TensorDict) {
			_, err := td.MemmapInPlace(filepath.Join(t.TempDir(), "td"))
			require.NoError(t, err)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			td := planSeed(t)
			p := leafPlanOf(td).structure()
			assert.Equal(t, []string{"a", "b", "n.c"}, planKeys(p))
			require.Same(t, p, leafPlanOf(td), "unedited: the same plan")
			c.change(t, td)
			q := leafPlanOf(td).structure()
			if c.same {
				assert.Same(t, p, q)
				return
			}
			assert.NotSame(t, p, q)
			fresh := &leafPlan{td: td}
			fresh.structure()
			assert.Equal(t, planKeys(fresh), planKeys(q))
			if c.keys != nil {
				assert.Equal(t, c.keys, planKeys(q))
			}
			for i, it := range q.leaves {
				x, err := td.Get(it.Key)
				require.NoError(t, err)
				assert.Same(t, x, it.Tensor, "%v: the tensor td holds now", it.Key)
				assert.Same(t, fresh.leaves[i].Tensor, it.Tensor)
			}
			assert.Equal(t, fresh.hash, q.hash)
			assert.Equal(t, structureHash(td, sortedLeaves(td)), q.hash)
			assert.Same(t, q, leafPlanOf(td), "kept for the next call")
		})
	}
}

// TestLeafPlanReducible checks the checks that every reduction makes
// again with a kept plan: a storage released and a dtype the op does not
// apply to after the plan was made, and which leaf an error names.
func TestLeafPlanReducible(t *testing.T) {
	td := New()
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 1, 3)))
	x := tensor.Full(tensor.Float32, 1, 3)
	require.NoError(t, td.Set(K("b"), x))
	z := tensor.Full(tensor.Complex64, 1, 2)
	require.NoError(t, td.Set(K("c"), z))
	e, err := tensor.Full(tensor.Float32, 1, 1, 3).Expand(2, 3)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("d"), e))

	p := leafPlanOf(td).reduceLayout()
	err = p.red.Check(coll.Sum)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key d: ")
	assert.Contains(t, err.Error(), "repeats elements")

	err = p.red.Check(coll.Max)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key c: ", "the complex leaf comes before the expanded one")

	require.NoError(t, x.Storage().Release())
	require.Same(t, p, leafPlanOf(td), "a release is not an edit")
	err = p.red.Check(coll.Max)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key b: storage was released", "the first leaf at fault")

	require.NoError(t, td.Del(K("d")))
	require.NoError(t, td.Del(K("b")))
	assert.NoError(t, leafPlanOf(td).reduceLayout().red.Check(coll.Sum))
}

// TestCollectiveAllReducePlan reduces TensorDicts again after changing
// them, on every rank alike or on one rank: each reduction takes the
// tensors the TensorDict holds at the call, whatever it reduced before.
func TestCollectiveAllReducePlan(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	want := float64(n * (n + 1) / 2)
	for _, cons := range []bool{false, true} {
		name := "plain"
		if cons {
			name = "consolidated"
		}
		mpitest.Run(t, name, func(t *testing.T) {
			td := New(2)
			require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, float64(r+1), 2, 3)))
			require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Float32, float64(r+1), 2)))
			if cons {
				var err error
				td, err = td.Consolidate()
				require.NoError(t, err)
			}
			require.NoError(t, td.AllReduce(ReduceSum))
			require.NoError(t, td.AllReduce(ReduceMin)) // the kept plan
			for _, k := range []Key{K("a"), K("n", "b")} {
				x, err := td.Get(k)
				require.NoError(t, err)
				collRequireAll(t, x, want, k.String())
			}

			// A leaf replaced: the new one is reduced, the old one left.
			old, err := td.Get(K("n", "b"))
			require.NoError(t, err)
			require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Float32, float64(r+1), 2)))
			require.NoError(t, td.AllReduce(ReduceSum))
			x, err := td.Get(K("n", "b"))
			require.NoError(t, err)
			collRequireAll(t, x, want, "the new leaf")
			collRequireAll(t, old, want, "the old leaf, reduced once")
			a, err := td.Get(K("a"))
			require.NoError(t, err)
			collRequireAll(t, a, float64(n)*want, "a, reduced twice")

			// A leaf added on every rank.
			require.NoError(t, td.Set(K("n", "c"), tensor.Full(tensor.Int32, float64(r+1), 2)))
			require.NoError(t, td.AllReduce(ReduceMax))
			c, err := td.Get(K("n", "c"))
			require.NoError(t, err)
			collRequireAll(t, c, float64(n), "the added leaf")

			// A leaf added on the last rank only: a mismatch everywhere,
			// nothing reduced.
			if r == n-1 {
				require.NoError(t, td.Set(K("z"), tensor.Full(tensor.Float32, 1, 2)))
			}
			err = td.AllReduce(ReduceSum)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMismatch)
			collRequireAll(t, c, float64(n), "not reduced on a mismatch")
			if r == n-1 {
				require.NoError(t, td.Del(K("z")))
			}

			// A storage released on rank 0 after the plan was kept: every
			// rank fails, rank 0 naming the leaf.
			require.NoError(t, td.AllReduce(ReduceMax))
			if r == 0 {
				require.NoError(t, c.Storage().Release())
			}
			err = td.AllReduce(ReduceMax)
			require.Error(t, err)
			if r == 0 {
				assert.Contains(t, err.Error(), "storage was released")
			} else {
				var pe *PeerError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, 0, pe.Rank)
			}
		})
	}
}

// TestCollectiveAllReduceBucketViews reduces, twice (the second time by
// the kept plan), a bucket that holds contiguous leaves, copied through
// the bytes the plan keeps, beside views that are not, copied through
// their tensors, and checks that the elements outside the views stay.
func TestCollectiveAllReduceBucketViews(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	want := float64(n * (n + 1) / 2)
	td := New(4)
	base := tensor.Full(tensor.Float32, float64(r+1), 4, 6)
	view, err := base.Slice(1, 0, 6, 2) // every other column
	require.NoError(t, err)
	require.False(t, view.IsContiguous())
	require.NoError(t, td.Set(K("b"), view))
	for _, k := range []string{"a", "c"} {
		require.NoError(t, td.Set(K(k), tensor.Full(tensor.Float32, float64(r+1), 4, 5)))
	}
	require.NoError(t, td.AllReduce(ReduceSum))
	require.NoError(t, td.AllReduce(ReduceMax))
	for _, k := range []string{"a", "b", "c"} {
		x, err := td.Get(K(k))
		require.NoError(t, err)
		collRequireAll(t, x, want, k)
	}
	odd, err := base.Slice(1, 1, 6, 2)
	require.NoError(t, err)
	collRequireAll(t, odd, float64(r+1), "columns outside the view")
}

// TestLeafPlanBlock checks the block layout a plan keeps: taken again
// while the TensorDict is unedited, made anew after an edit, and not kept
// for a TensorDict with a composite non-tensor value.
func TestLeafPlanBlock(t *testing.T) {
	td := planSeed(t)
	b, ok, err := leafPlanOf(td).blockLayout()
	require.NoError(t, err)
	require.True(t, ok)
	want, err := layBlock(td)
	require.NoError(t, err)
	assert.Equal(t, want.Meta, b.Meta)
	assert.Equal(t, want.Total, b.Total)
	b2, _, _ := leafPlanOf(td).blockLayout()
	assert.NotSame(t, b.p, b2.p, "not kept from the first call")
	assert.Equal(t, want.Meta, b2.Meta)
	b3, _, _ := leafPlanOf(td).blockLayout()
	assert.Same(t, b2.p, b3.p, "kept from the second")

	require.NoError(t, td.SetNonTensor(K("label"), "changed"))
	for range 3 {
		b4, ok, err := leafPlanOf(td).blockLayout()
		require.NoError(t, err)
		require.True(t, ok)
		assert.NotSame(t, b3.p, b4.p)
		assert.Contains(t, string(b4.Meta), "changed")
	}

	require.NoError(t, td.SetNonTensor(K("info"), map[string]any{"n": int64(1)}))
	_, ok, _ = leafPlanOf(td).blockLayout()
	assert.False(t, ok, "a composite value can change in place: laid out every call")
}

// TestCollectiveAllGatherPlan gathers a TensorDict again after changing
// it: values in place, a leaf added, a scalar non-tensor value replaced, a
// composite one changed in place, a storage released on one rank.
func TestCollectiveAllGatherPlan(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	td := New(2)
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, float64(r), 2, 3)))
	require.NoError(t, td.SetNonTensor(K("label"), "x"))
	gather := func() []*TensorDict {
		t.Helper()
		out, err := td.AllGather()
		require.NoError(t, err)
		require.Len(t, out, n)
		return out
	}
	gather()
	require.NoError(t, td.SetInPlace(K("a"), tensor.Full(tensor.Float32, float64(10+r), 2, 3)))
	for i, got := range gather() {
		a, err := got.Get(K("a"))
		require.NoError(t, err)
		collRequireAll(t, a, float64(10+i), "values changed in place")
	}
	require.NoError(t, td.Set(K("b"), tensor.Full(tensor.Int64, float64(r), 2)))
	require.NoError(t, td.SetNonTensor(K("label"), fmt.Sprintf("r%d", r)))
	for i, got := range gather() {
		b, err := got.Get(K("b"))
		require.NoError(t, err)
		collRequireAll(t, b, float64(i), "an added leaf")
		l, err := got.GetNonTensor(K("label"))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("r%d", i), l)
	}
	require.NoError(t, td.SetNonTensor(K("info"), map[string]any{"n": 0}))
	gather()
	info, err := td.GetNonTensor(K("info"))
	require.NoError(t, err)
	info.(map[string]any)["n"] = int64(r + 5) // in place, behind the edit counts
	for i, got := range gather() {
		v, err := got.GetNonTensor(K("info"))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(map[string]any{"n": i + 5}), fmt.Sprint(v), "a composite value changed in place")
	}
	if r == 0 {
		a, err := td.Get(K("a"))
		require.NoError(t, err)
		require.NoError(t, a.Storage().Release())
	}
	_, err = td.AllGather()
	require.Error(t, err)
	if r != 0 {
		var pe *PeerError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 0, pe.Rank)
	}
}
