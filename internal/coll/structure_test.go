// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestDiffRanks checks the explanation ranks exchange when their
// structure hashes differ, through the JSON the reference rank broadcasts
// and the slot each rank's difference is gathered in.
func TestDiffRanks(t *testing.T) {
	leaf := func(k string, dt tensor.DType, shape ...int) codec.StructLeaf {
		return codec.StructLeaf{Key: codec.Key(strings.Split(k, ".")), DType: dt, Shape: shape}
	}
	ref := codec.Structure{Batch: []int{2}, Leaves: []codec.StructLeaf{leaf("a", tensor.Float32, 2, 3), leaf("n.b", tensor.Int64, 2)}}
	for _, tt := range []struct {
		name   string
		mine   codec.Structure
		key    codec.Key
		detail string
	}{
		{"same", ref, nil, ""},
		{"dtype", codec.Structure{Batch: []int{2}, Leaves: []codec.StructLeaf{leaf("a", tensor.Float64, 2, 3), leaf("n.b", tensor.Int64, 2)}},
			codec.Key{"a"}, "float64[2 3] on rank 1, float32[2 3] on rank 0"},
		{"shape", codec.Structure{Batch: []int{2}, Leaves: []codec.StructLeaf{leaf("a", tensor.Float32, 2, 3), leaf("n.b", tensor.Int64, 2, 1)}},
			codec.Key{"n", "b"}, "int64[2 1] on rank 1, int64[2] on rank 0"},
		{"extra", codec.Structure{Batch: []int{2}, Leaves: []codec.StructLeaf{leaf("a", tensor.Float32, 2, 3), leaf("n.b", tensor.Int64, 2), leaf("n.c", tensor.Int8, 2)}},
			codec.Key{"n", "c"}, "int8[2] on rank 1, missing on rank 0"},
		{"missing", codec.Structure{Batch: []int{2}, Leaves: []codec.StructLeaf{leaf("n.b", tensor.Int64, 2)}},
			codec.Key{"a"}, "missing on rank 1, float32[2 3] on rank 0"},
		{"none", codec.Structure{Batch: []int{2}},
			codec.Key{"a"}, "missing on rank 1, float32[2 3] on rank 0"},
		{"batch", codec.Structure{Batch: []int{}, Leaves: ref.Leaves}, nil, "[] on rank 1, [2] on rank 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, detail, ok := diffRanks(tt.mine, 1, ref, 0)
			assert.Equal(t, tt.detail == "", ok)
			assert.Equal(t, tt.key, k)
			assert.Equal(t, tt.detail, detail)

			slot := make([]byte, diffSlot)
			putDiff(slot, diffEncoded(tt.mine, 1, encodeStructure(ref), 0))
			sd, found := getDiff(slot)
			assert.Equal(t, !ok, found)
			if found {
				assert.Equal(t, tt.key, sd.Key)
				assert.Equal(t, tt.detail, sd.Detail)
			}
			assert.Equal(t, ok, tt.mine.Hash(codec.SortedOrder) == ref.Hash(codec.SortedOrder), "the hash tells the same cases apart")
		})
	}
}

// TestDiffSlot checks the slot of a difference too long for it, of a
// reference that cannot be decoded, and of garbage.
func TestDiffSlot(t *testing.T) {
	slot := make([]byte, diffSlot)
	long := strings.Repeat("x", 2*diffSlot)
	putDiff(slot, &slotDiff{Key: codec.Key{"k"}, Detail: long})
	sd, ok := getDiff(slot)
	require.True(t, ok)
	assert.Nil(t, sd.Key)
	assert.Equal(t, long[:diffSlot/2]+"...", sd.Detail)

	clear(slot)
	putDiff(slot, diffEncoded(codec.Structure{}, 1, []byte("{not json"), 0))
	sd, ok = getDiff(slot)
	require.True(t, ok)
	assert.Contains(t, sd.Detail, "cannot decode rank 0's structure")

	clear(slot)
	slot[0] = 200 // a length whose JSON is not there
	sd, ok = getDiff(slot)
	require.True(t, ok)
	assert.Equal(t, "(undecodable difference)", sd.Detail)

	slot[1] = 200 // a length over the slot
	sd, ok = getDiff(slot)
	require.True(t, ok)
	assert.Equal(t, "(undecodable difference)", sd.Detail)
}
