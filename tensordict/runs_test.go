// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestStateRuns: the runs of a TensorDict whose leaves lie apart
// (stateRuns), put end to end, are its consolidated storage, pads and
// gaps zero; the large leaves' runs are views of their bytes, their
// storages held.
func TestStateRuns(t *testing.T) {
	big := wire.RunMin / 4 // float32 elements
	td := New()
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Uint8, 1, 3)))
	require.NoError(t, td.Set(K("n", "big"), tensor.Full(tensor.Float32, 2, big+1)))
	require.NoError(t, td.Set(K("n", "c"), tensor.Full(tensor.Complex128, 3, 2)))
	require.NoError(t, td.Set(K("empty"), tensor.Zeros(tensor.Int64, 0)))
	require.NoError(t, td.Set(K("big2"), tensor.Full(tensor.Int16, 4, wire.RunMin/2+3)))
	require.NoError(t, td.Set(K("z"), tensor.Full(tensor.Int8, 5, 5)))
	cons, err := td.Consolidate()
	require.NoError(t, err)
	want := cons.ConsolidatedStorage().Bytes()

	s, err := p2pStateOf("test", td)
	require.NoError(t, err)
	defer s.mu.Unlock()
	require.Nil(t, s.st)
	var held holds
	runs, err := s.stateRuns(&held)
	held.End(nil)
	require.NoError(t, err)
	var got []byte
	for _, r := range runs {
		got = append(got, r...)
	}
	assert.Equal(t, want, got, "the runs end to end are the consolidated storage")
	bigBytes, err := mustGet(t, td, K("n", "big")).Bytes()
	require.NoError(t, err)
	views := 0
	for _, r := range runs {
		if len(r) > 0 && &r[0] == &bigBytes[0] {
			views++
		}
	}
	assert.Equal(t, 1, views, "a large leaf's run is a view of its bytes")
	assert.Greater(t, len(runs), 2)
}

// TestInitRemoteRuns: InitRemote of TensorDicts whose large leaves travel
// in place, in one message from blocks (xfer.Link.SendBlocks) or, past
// blocksMax, as runs (wire.FlagRuns), set one by one, with small leaves, a
// non-tensor value and a complex128 leaf between them: each result equals
// the sender's TensorDict, into memory of its own, a memory-mapped file
// and an allocator's storage, with and without a context; a receiver
// whose limit the storage passes refuses it, drains its runs, and takes
// the next one; a large leaf that is not contiguous is packed instead.
func TestInitRemoteRuns(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	sized := func(base float64, big int) *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Uint8, base, 2, 3)))
		require.NoError(t, td.Set(K("n", "big"), tensor.Full(tensor.Float32, base+1, 2, big/8+3)))
		require.NoError(t, td.Set(K("n", "c"), tensor.Full(tensor.Complex128, base+2, 2)))
		require.NoError(t, td.SetNonTensor(K("n", "note"), "runs"))
		require.NoError(t, td.Set(K("big2"), tensor.Full(tensor.Int64, base+3, 2, big/16)))
		require.NoError(t, td.Set(K("z"), tensor.Full(tensor.Int8, base+4, 2, 1)))
		return td
	}
	// build's storage is sent as one message from blocks, large's as
	// runs, one message each (blocksMax).
	build := func(base float64) *TensorDict { return sized(base, wire.RunMin) }
	large := func(base float64) *TensorDict { return sized(base, blocksMax) }
	// The same TensorDict sent again and again: its state's layout and
	// metadata (described by a kept structure), its values filled anew.
	var same, sameLarge *TensorDict
	again := func(base float64) *TensorDict {
		if same == nil {
			same = build(0)
		}
		fill(t, same, base)
		return same
	}
	againLarge := func(base float64) *TensorDict {
		if sameLarge == nil {
			sameLarge = large(0)
		}
		fill(t, sameLarge, base)
		return sameLarge
	}
	strided := func(base float64) *TensorDict {
		td := New()
		x, err := tensor.Full(tensor.Float32, base, 4, wire.RunMin).Transpose(0, 1)
		require.NoError(t, err)
		require.NoError(t, td.Set(K("t"), x))
		return td
	}
	var spare *tensor.Storage
	alloc := WithAllocator(func(n int) (*tensor.Storage, error) {
		spare = tensor.NewStorage(n)
		return spare, nil
	})
	cases := []struct {
		name  string
		td    func(float64) *TensorDict
		opts  []RemoteOption
		limit bool // the receiver's WithMaxBytes refuses it
	}{
		{name: "plain", td: build},
		{name: "context", td: build, opts: []RemoteOption{testCtx(t)}},
		{name: "memmap", td: build, opts: []RemoteOption{WithMemmap(t.TempDir())}},
		{name: "allocator", td: build, opts: []RemoteOption{alloc}},
		{name: "refused", td: build, limit: true},
		{name: "after the refusal", td: build},
		{name: "not contiguous", td: strided},
		{name: "same", td: again},
		{name: "same again", td: again},
		{name: "same, context", td: again, opts: []RemoteOption{testCtx(t)}},
		{name: "runs", td: large},
		{name: "runs, context", td: large, opts: []RemoteOption{testCtx(t)}},
		{name: "runs refused", td: large, limit: true},
		{name: "runs after the refusal", td: large},
		{name: "same large", td: againLarge},
		{name: "same large again", td: againLarge},
	}
	for i, c := range cases {
		base := float64(5 * i) // within int8 for "z"
		if g.Rank() == 0 {
			require.NoError(t, c.td(base).InitRemote(1), c.name)
			continue
		}
		opts := c.opts
		if c.limit {
			opts = append(opts, WithMaxBytes(wire.RunMin))
		}
		got, err := FromRemoteInit(0, opts...)
		if c.limit {
			require.ErrorIs(t, err, wire.ErrLimit, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		want, err := c.td(base).Consolidate()
		require.NoError(t, err)
		// The same entries (a received node lists its non-tensor values
		// first, as the metadata does) and the same storage.
		assert.ElementsMatch(t, want.Keys(IncludeNested()), got.Keys(IncludeNested()), c.name)
		if c.name != "not contiguous" {
			note, err := got.GetNonTensor(K("n", "note"))
			require.NoError(t, err)
			assert.Equal(t, "runs", note)
		}
		wb := want.ConsolidatedStorage().Bytes()
		gb := got.ConsolidatedStorage().Bytes()
		assert.Equal(t, wb, gb, "%s: the storage, pads included", c.name)
		if c.name == "allocator" {
			assert.Same(t, spare, got.ConsolidatedStorage())
		}
	}
}
