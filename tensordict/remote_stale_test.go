// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// staleTD is a small TensorDict (inline InitRemote) with a non-tensor value.
func staleTD(t testing.TB) *TensorDict {
	t.Helper()
	td := p2pTD(t)
	require.NoError(t, td.SetNonTensor(K("s"), "one"))
	require.NoError(t, td.SetNonTensor(K("a", "n"), 1))
	return td
}

// leavesAre reports whether every element of every leaf of td is v.
// (EqScalar would compare the non-tensor values with v too.)
func leavesAre(td *TensorDict, v float64) bool {
	for _, it := range td.Items(IncludeNested(), LeavesOnly()) {
		if !it.Tensor.Equal(tensor.Full(it.Tensor.DType(), v, it.Tensor.Shape()...)) {
			return false
		}
	}
	return true
}

// changeMeta changes everything of td's metadata but its leaves.
func changeMeta(t testing.TB, td *TensorDict) {
	t.Helper()
	require.NoError(t, td.SetNonTensor(K("s"), "two"))
	require.NoError(t, td.SetNonTensor(K("a", "n"), 2))
	require.NoError(t, td.SetBatchSize())
	td.SetClassName("tdmpi.test.Renamed")
	td.Lock()
}

// TestInitRemoteAfterMetadataChange sends the same small TensorDict twice,
// changing between the two its non-tensor values, batch size, class name
// and lock state but not its leaves: the second copy must carry the new
// metadata, not the one cached by the first InitRemote.
func TestInitRemoteAfterMetadataChange(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	if g.Rank() == 0 {
		td := staleTD(t)
		fill(t, td, 1)
		require.NoError(t, td.InitRemote(1))
		changeMeta(t, td)
		require.NoError(t, td.InitRemote(1))
		// And back: a change to the cached state is seen both ways.
		td.Unlock()
		require.NoError(t, td.SetNonTensor(K("s"), "three"))
		require.NoError(t, td.SetBatchSize(3))
		require.NoError(t, td.InitRemote(1))
		return
	}
	nonTensor := func(td *TensorDict, k Key) any {
		t.Helper()
		v, err := td.GetNonTensor(k)
		require.NoError(t, err)
		return v
	}
	first, err := FromRemoteInit(0, testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, "one", nonTensor(first, K("s")))
	assert.EqualValues(t, 1, nonTensor(first, K("a", "n")))
	assert.Equal(t, []int{3}, first.BatchSize())
	assert.False(t, first.IsLocked())
	assert.Equal(t, "", first.ClassName())

	second, err := FromRemoteInit(0, testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, "two", nonTensor(second, K("s")))
	assert.EqualValues(t, 2, nonTensor(second, K("a", "n")))
	assert.Equal(t, []int{}, second.BatchSize())
	assert.True(t, second.IsLocked())
	assert.Equal(t, "tdmpi.test.Renamed", second.ClassName())
	assert.True(t, leavesAre(second, 1))

	third, err := FromRemoteInit(0, testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, "three", nonTensor(third, K("s")))
	assert.Equal(t, []int{3}, third.BatchSize())
	assert.False(t, third.IsLocked())
}

// TestSendAfterMetadataChange checks that Send's cached header follows a
// batch-size change: a receiver that kept the old batch size is told of
// the mismatch, one that made the same change receives the data.
func TestSendAfterMetadataChange(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td := staleTD(t)
	if g.Rank() == 0 {
		fill(t, td, 1)
		require.NoError(t, td.Send(1, WithConsolidated()))
		changeMeta(t, td)
		fill(t, td, 2)
		require.NoError(t, td.Send(1, WithConsolidated()))
		return
	}
	_, err := td.Recv(0, WithConsolidated(), testCtx(t))
	require.NoError(t, err)
	assert.True(t, leavesAre(td, 1))
	require.NoError(t, td.SetBatchSize())
	_, err = td.Recv(0, WithConsolidated(), testCtx(t))
	require.NoError(t, err)
	assert.True(t, leavesAre(td, 2))
}

// TestP2PStateFollowsMetadata checks, on one rank, that the cached state
// is rebuilt when only the metadata changes, and that checking it costs
// no allocation, for a TensorDict larger than the pooled plans.
func TestP2PStateFollowsMetadata(t *testing.T) {
	td := staleTD(t)
	for i := range 6 {
		require.NoError(t, td.Set(K("b", string(rune('a'+i))), tensor.Zeros(tensor.Float32, 3, 4)))
	}
	state := func() []byte {
		s, err := p2pStateOf("test", td)
		require.NoError(t, err)
		defer s.mu.Unlock()
		return bytes.Clone(s.meta)
	}
	before := state()
	assert.Equal(t, before, state(), "unchanged metadata")
	allocs := testing.AllocsPerRun(100, func() {
		s, err := p2pStateOf("test", td)
		if err != nil {
			panic(err)
		}
		s.mu.Unlock()
	})
	assert.Equal(t, 0., allocs, "checking an unchanged state")

	meta, _, err := Layout(td)
	require.NoError(t, err)
	assert.Equal(t, string(meta), string(bytes.TrimRight(before, " ")))
	changeMeta(t, td)
	after := state()
	assert.NotEqual(t, string(before), string(after))
	meta, _, err = Layout(td)
	require.NoError(t, err)
	assert.Equal(t, string(meta), string(bytes.TrimRight(after, " ")))
}

// BenchmarkP2PStateCheck measures what every Send, Recv and small
// InitRemote pays to confirm that the cached state is current.
func BenchmarkP2PStateCheck(b *testing.B) {
	td := staleTD(b)
	b.ReportAllocs()
	for b.Loop() {
		s, err := p2pStateOf("bench", td)
		if err != nil {
			b.Fatal(err)
		}
		s.mu.Unlock()
	}
}

// TestP2PStateFollowsEachChange checks, change by change, that the cached
// state's metadata is Layout's after a change that keeps every tensor: the
// state skips the leaves when it checks the metadata, so a leaf renamed
// over the same tensor must still rebuild it; and it skips the check when
// no node of the TensorDict was edited since, so a list or map value
// edited in place (GetNonTensor hands out the stored value) must still be
// seen.
func TestP2PStateFollowsEachChange(t *testing.T) {
	inPlace := func(k Key, edit func(v any)) func(td *TensorDict) error {
		return func(td *TensorDict) error {
			v, err := td.GetNonTensor(k)
			if err == nil {
				edit(v)
			}
			return err
		}
	}
	for _, c := range []struct {
		name   string
		before func(td *TensorDict) error // before the state is built
		change func(td *TensorDict) error
	}{
		{"list edited in place", func(td *TensorDict) error { return td.SetNonTensor(K("a", "l"), []any{1, 2}) },
			inPlace(K("a", "l"), func(v any) { v.([]any)[0] = int64(7) })},
		{"map edited in place", func(td *TensorDict) error { return td.SetNonTensor(K("m"), map[string]any{"k": "v"}) },
			inPlace(K("m"), func(v any) { v.(map[string]any)["k"] = "w" })},
		{"non-tensor", nil, func(td *TensorDict) error { return td.SetNonTensor(K("s"), "two") }},
		{"nested non-tensor", nil, func(td *TensorDict) error { return td.SetNonTensor(K("a", "n"), 2) }},
		{"batch size", nil, func(td *TensorDict) error { return td.SetBatchSize() }},
		{"lock", nil, func(td *TensorDict) error { td.Lock(); return nil }},
		{"class", nil, func(td *TensorDict) error { td.SetClassName("tdmpi.test.Renamed"); return nil }},
		{"leaf renamed over the same tensor", nil, func(td *TensorDict) error {
			// The last entry of the root: the new one takes its index.
			x, err := td.Get(K("z"))
			if err != nil {
				return err
			}
			if err := td.Del(K("z")); err != nil {
				return err
			}
			return td.Set(K("renamed"), x)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			td := staleTD(t)
			require.NoError(t, td.Set(K("z"), tensor.Ones(tensor.Float32, td.BatchSize()...)))
			if c.before != nil {
				require.NoError(t, c.before(td))
			}
			s, err := p2pStateOf("test", td)
			require.NoError(t, err)
			s.mu.Unlock()
			require.NoError(t, c.change(td))
			s, err = p2pStateOf("test", td)
			require.NoError(t, err)
			got := string(bytes.TrimRight(s.meta, " "))
			s.mu.Unlock()
			want, _, err := Layout(td)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)
		})
	}
}
