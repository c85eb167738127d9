// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensor

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// viewsOver returns two views of one 32-byte storage, as a receiver's
// template holds: float64 [2] at 0 and bool [3] at 16.
func viewsOver(t *testing.T, st *Storage) []Tensor {
	t.Helper()
	like := make([]Tensor, 2)
	require.NoError(t, FromStorageInto(&like[0], nil, Float64, st, 0, 2))
	require.NoError(t, FromStorageInto(&like[1], nil, Bool, st, 16, 3))
	return like
}

func TestViewsLike(t *testing.T) {
	like := viewsOver(t, NewStorage(32))

	b := make([]byte, 32)
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(1.5))
	b[16], b[18] = 1, 1
	st := StorageOf(alignedCopy(b))
	dst := make([]Tensor, 2)
	require.NoError(t, ViewsLike(dst, st, like))
	for i := range dst {
		require.Same(t, st, dst[i].Storage())
		require.Equal(t, like[i].Shape(), dst[i].Shape())
		require.Equal(t, like[i].Offset(), dst[i].Offset())
		require.Equal(t, like[i].DType(), dst[i].DType())
		require.Same(t, &like[i].shape[0], &dst[i].shape[0], "shape shared, not copied")
	}
	require.Equal(t, 2.0, dst[1].Sum(), "bools read from the new storage")
	got, err := Data[float64](&dst[0])
	require.NoError(t, err)
	require.Equal(t, []float64{0, 1.5}, got)
}

func TestViewsLikeRefuses(t *testing.T) {
	like := viewsOver(t, NewStorage(32))
	badBool := alignedCopy(make([]byte, 32))
	badBool[17] = 7
	released := NewStorage(32)
	require.NoError(t, released.Release())
	tr, err := mustFromStorage(t, Float64, NewStorage(32), 0, 2, 2).Transpose(0, 1)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		st   *Storage
		like []Tensor
		err  string
	}{
		{"short storage", NewStorage(18), like, "tensor: ViewsLike: tensor 1, bool[3], needs bytes [16, 19), storage has 18"},
		{"misaligned", StorageOf(make([]byte, 40)[1:33]), like, "tensor: ViewsLike: tensor 0 at offset 0 is not aligned to 8 bytes for float64"},
		{"bool byte", StorageOf(badBool), like, "tensor: ViewsLike: tensor 1: bool element 1 is byte 7, want 0 or 1"},
		{"released", released, like, "tensor: ViewsLike: storage was released (closed memory map?)"},
		{"not contiguous", NewStorage(32), []Tensor{*tr}, "tensor: ViewsLike: tensor 0 of shape [2 2] has strides [1 2]: not contiguous"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ViewsLike(make([]Tensor, len(c.like)), c.st, c.like)
			require.EqualError(t, err, c.err)
			if c.st == released {
				require.ErrorIs(t, err, ErrReleased)
			}
		})
	}
	require.Panics(t, func() { _ = ViewsLike(make([]Tensor, 1), NewStorage(32), like) })
}

func mustFromStorage(t *testing.T, dt DType, st *Storage, off int, shape ...int) *Tensor {
	t.Helper()
	x, err := FromStorage(dt, st, off, shape...)
	require.NoError(t, err)
	return x
}

// alignedCopy returns b's bytes in memory aligned for every dtype.
func alignedCopy(b []byte) []byte {
	c := alignedBytes(len(b))
	copy(c, b)
	return c
}
