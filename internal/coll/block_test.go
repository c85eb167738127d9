// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/wire"
)

// TestBlockRoundTrip packs blocks and splits them again: the storage the
// leaves wrote, the class name and the metadata come back as they were,
// and the padding is zero.
func TestBlockRoundTrip(t *testing.T) {
	cl := &Call{Op: "AllGather", Size: 1}
	for _, b := range []Block{
		{},
		{Class: "Point", Meta: []byte(`{"a":1}`), Total: 16},
		{Meta: []byte(`{}`), Total: 8},
		{Class: "C", Total: 0},
	} {
		in := b.Info(nil)
		assert.Equal(t, [InfoLen]int64{0, int64(len(b.Class)), int64(len(b.Meta)), int64(b.Total)}, in)
		words := make([]uint64, Words(in[:]))
		for i := range words {
			words[i] = ^uint64(0) // not cleared, as RecvWords's
		}
		require.NoError(t, b.Pack(words, func(st []byte) error {
			require.Len(t, st, b.Total)
			for i := range st {
				st[i] = byte(i + 1)
			}
			return nil
		}))
		st, class, meta, err := cl.Unblock(0, in[:], words)
		require.NoError(t, err)
		assert.Equal(t, b.Total, len(st))
		for i, c := range st {
			assert.Equal(t, byte(i+1), c)
		}
		assert.Equal(t, b.Class, class)
		assert.Equal(t, string(b.Meta), string(meta))
		raw := WordsAsBytes(words)
		assert.Equal(t, strings.Repeat("\x00", len(raw)-b.Total-len(b.Class)-len(b.Meta)), string(raw[b.Total+len(b.Class)+len(b.Meta):]))
		_, _, _, err = cl.Unblock(0, in[:], words[:len(words)/2])
		if len(words) > 1 {
			assert.ErrorContains(t, err, "rank 0: block of")
		}
	}
	assert.Equal(t, [InfoLen]int64{1, 0, 0, 0}, Block{Class: "x"}.Info(errors.New("failed")))
	err := Block{Total: 8}.Pack(make([]uint64, 1), func([]byte) error { return errors.New("released") })
	assert.ErrorContains(t, err, "packing the leaves: released")
}

// TestLayoutBlocks lays out the blocks of three ranks, and checks the
// infos a rank refuses.
func TestLayoutBlocks(t *testing.T) {
	cl := &Call{Op: "AllGather", Size: 3, Lim: wire.Limits{MaxTotal: 64}.Resolve()}
	infos := []int64{
		0, 1, 7, 16, // 3 words
		0, 0, 0, 0, // none
		0, 2, 3, 40, // 6 words, rounded up
	}
	displs, counts, words, err := cl.LayoutBlocks(infos, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 3, 3}, displs)
	assert.Equal(t, []int{3, 0, 6}, counts)
	assert.Equal(t, 9, words)
	displs, counts, words, err = cl.LayoutBlocks(infos, func(r int) bool { return r != 0 })
	require.NoError(t, err)
	assert.Equal(t, []int{0, 0, 0}, displs)
	assert.Equal(t, []int{0, 0, 6}, counts)
	assert.Equal(t, 6, words)
	assert.Equal(t, 3, cl.FirstFailed(infos))
	infos[4] = 1
	assert.Equal(t, 1, cl.FirstFailed(infos))
	infos[4] = 0

	for _, c := range []struct {
		name string
		in   [InfoLen]int64
		want string
	}{
		{"negative class", [InfoLen]int64{0, -1, 0, 0}, "rank 1 announced a class name of -1 bytes"},
		{"odd storage", [InfoLen]int64{0, 0, 0, 12}, "rank 1 announced a storage of 12 bytes, not a multiple of 8"},
		{"storage over the limit", [InfoLen]int64{0, 0, 0, 72}, "rank 1: "},
		{"negative metadata", [InfoLen]int64{0, 0, -5, 8}, "rank 1: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.ErrorContains(t, cl.CheckInfo(1, c.in[:]), c.want)
		})
	}
	// Each storage within the limit, their sum over it.
	over := []int64{0, 0, 0, 32, 0, 0, 0, 32, 0, 0, 0, 8}
	_, _, _, err = cl.LayoutBlocks(over, nil)
	var le *wire.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, int64(72), le.Value)
	assert.ErrorIs(t, err, wire.ErrLimit)
}
