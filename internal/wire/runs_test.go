// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRuns(t *testing.T) {
	const big, small = RunMin, RunMin * 3 / 4
	for _, c := range []struct {
		name    string
		leaves  []Span
		total   int64
		want    []Span
		inPlace []bool
	}{
		{name: "small leaves only", leaves: []Span{{0, 8}, {8, 100}}, total: 112,
			want: []Span{{0, 112}}, inPlace: []bool{false}},
		{name: "one big leaf", leaves: []Span{{0, big}}, total: big,
			want: []Span{{0, big}}, inPlace: []bool{true}},
		{name: "big between small", leaves: []Span{{0, 8}, {8, big}, {8 + big, 4}}, total: 8 + big + 8,
			want: []Span{{0, 8}, {8, big}, {8 + big, 8}}, inPlace: []bool{false, true, false}},
		{name: "two big, a pad between", leaves: []Span{{0, big + 4}, {big + 8, big}}, total: 2*big + 8,
			want: []Span{{0, big + 4}, {big + 4, 4}, {big + 8, big}}, inPlace: []bool{true, false, true}},
		{name: "adjacent big leaves", leaves: []Span{{0, big}, {big, big}}, total: 2 * big,
			want: []Span{{0, big}, {big, big}}, inPlace: []bool{true, true}},
		{name: "a leaf over MaxChunk", leaves: []Span{{16, 2*MaxChunk + 8}}, total: 2*MaxChunk + 24,
			want: []Span{{0, 16}, {16, MaxChunk}, {16 + MaxChunk, MaxChunk}, {16 + 2*MaxChunk, 8}}, inPlace: []bool{false, true, true, true}},
		{name: "small leaves over MaxChunk", leaves: []Span{{0, small}, {MaxChunk - small/2, small}, {MaxChunk + small, 8}}, total: MaxChunk + small + 8,
			want: []Span{{0, MaxChunk - small/2}, {MaxChunk - small/2, small*3/2 + 8}}, inPlace: []bool{false, false}},
		{name: "empty", total: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, inPlace := Runs(nil, []bool{}, c.leaves, c.total)
			assert.Equal(t, c.want, got)
			if len(c.want) > 0 {
				assert.Equal(t, c.inPlace, inPlace)
			}
			// The runs tile [0, total), each leaf of under RunMin bytes in
			// one run, and fit every header check.
			pos := int64(0)
			for _, r := range got {
				require.Equal(t, pos, r.Start)
				require.True(t, r.Len > 0 && r.Len <= MaxChunk)
				pos = r.End()
				for _, l := range c.leaves {
					if l.Len < RunMin && l.Start < r.Start && l.End() > r.Start {
						t.Errorf("leaf %v cut at %d", l, r.Start)
					}
				}
			}
			assert.Equal(t, c.total, pos)
			assert.Equal(t, HasRuns(c.leaves), len(inPlace) > 0 && contains(inPlace, true))
			if c.total > 0 {
				h := Header{Kind: KindInit, Flags: FlagConsolidated | FlagRuns, Total: c.total, Chunk: int64(len(got)), Leaves: int64(len(c.leaves)), MetaLen: 100}
				assert.NoError(t, h.Check(Limits{}))
				assert.Equal(t, int64(len(got)), h.Chunks())
			}
		})
	}
}

func contains(b []bool, v bool) bool {
	for _, x := range b {
		if x == v {
			return true
		}
	}
	return false
}

func TestRunsHeaderChecks(t *testing.T) {
	ok := Header{Kind: KindInit, Flags: FlagConsolidated | FlagRuns, Total: 1 << 20, Chunk: 3, Leaves: 2, MetaLen: 100}
	require.NoError(t, ok.Check(Limits{}))
	for _, c := range []struct {
		name string
		edit func(h *Header)
	}{
		{"send frame", func(h *Header) { h.Kind = KindSend }},
		{"inline", func(h *Header) { h.Flags |= FlagInline }},
		{"per leaf", func(h *Header) { h.Flags |= FlagPerLeaf }},
		{"empty storage", func(h *Header) { h.Total = 0 }},
		{"no runs", func(h *Header) { h.Chunk = 0 }},
		{"too many runs", func(h *Header) { h.Chunk = 7 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := ok
			c.edit(&h)
			var he *HeaderError
			assert.ErrorAs(t, h.Check(Limits{}), &he)
		})
	}
}
