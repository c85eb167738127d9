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
	require.NoError(t, fromStorageInto(&like[0], nil, Float64, st, 0, 2))
	require.NoError(t, fromStorageInto(&like[1], nil, Bool, st, 16, 3))
	return like
}

func TestViewSetOver(t *testing.T) {
	like := viewsOver(t, NewStorage(32))
	v, err := newViewSet(like)
	require.NoError(t, err)
	require.Equal(t, 2, v.Len())

	b := make([]byte, 32)
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(1.5))
	b[16], b[18] = 1, 1
	for _, st := range []*Storage{StorageOf(alignedCopy(b)), StorageOf(alignedCopy(append(b, 9, 9)))} {
		dst := make([]Tensor, 2)
		require.NoError(t, v.Over(dst, st))
		for i := range dst {
			require.Same(t, st, dst[i].Storage())
			require.Equal(t, like[i].Shape(), dst[i].Shape())
			require.Equal(t, like[i].Offset(), dst[i].Offset())
			require.Equal(t, like[i].DType(), dst[i].DType())
			require.Same(t, &like[i].shape()[0], &dst[i].shape()[0], "shape shared, not copied")
		}
		require.Equal(t, 2.0, dst[1].Sum(), "bools read from the new storage")
		got, err := Data[float64](&dst[0])
		require.NoError(t, err)
		require.Equal(t, []float64{0, 1.5}, got)
	}
	require.Nil(t, v.like[0].st, "the set keeps no storage")
}

func TestViewSetRefuses(t *testing.T) {
	like := viewsOver(t, NewStorage(32))
	v, err := newViewSet(like)
	require.NoError(t, err)
	badBool := alignedCopy(make([]byte, 32))
	badBool[17] = 7
	released := NewStorage(32)
	require.NoError(t, released.Release())
	for _, c := range []struct {
		name string
		st   *Storage
		err  string
	}{
		{"short storage", NewStorage(18), "tensor: ViewSet.Over: the views need 19 bytes, storage has 18"},
		{"misaligned", StorageOf(make([]byte, 40)[1:33]), "tensor: ViewSet.Over: storage memory is not aligned to 8 bytes"},
		{"bool byte", StorageOf(badBool), "tensor: ViewSet.Over: tensor 1: bool element 1 is byte 7, want 0 or 1"},
		{"released", released, "tensor: ViewSet.Over: storage was released (closed memory map?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := make([]Tensor, 2)
			err := v.Over(dst, c.st)
			require.EqualError(t, err, c.err)
			if c.st == released {
				require.ErrorIs(t, err, ErrReleased)
			}
			require.Equal(t, make([]Tensor, 2), dst, "dst unchanged")
		})
	}
	require.Panics(t, func() { _ = v.Over(make([]Tensor, 1), NewStorage(32)) })
}

func TestNewViewSetRefuses(t *testing.T) {
	st := NewStorage(32)
	tr, err := mustFromStorage(t, Float64, st, 0, 2, 2).Transpose(0, 1)
	require.NoError(t, err)
	odd := mustFromStorage(t, Uint8, st, 3, 4)
	odd.dtype = Int32 // four bytes at an offset no int32 view may have
	for _, c := range []struct {
		name string
		like []Tensor
		err  string
	}{
		{"not contiguous", []Tensor{*tr}, "tensor: NewViewSet: tensor 0 of shape [2 2] has strides [1 2]: not contiguous"},
		{"misaligned offset", []Tensor{*mustFromStorage(t, Uint8, st, 0, 1), *odd}, "tensor: NewViewSet: tensor 1, int32[4], at offset 3: not a multiple of 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := newViewSet(c.like)
			require.EqualError(t, err, c.err)
		})
	}
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
