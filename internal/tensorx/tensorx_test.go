// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensorx_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestViewSet lays one layout over two storages through package tensor's
// function values and checks the views see each storage's bytes.
func TestViewSet(t *testing.T) {
	layout := tensor.NewStorage(24)
	a, err := tensor.FromStorage(tensor.Int32, layout, 0, 2)
	require.NoError(t, err)
	b, err := tensor.FromStorage(tensor.Float64, layout, 8, 2)
	require.NoError(t, err)
	vs, err := tensorx.NewViewSet([]tensor.Tensor{*a, *b})
	require.NoError(t, err)
	assert.Equal(t, 2, vs.Len())
	assert.False(t, vs.HasBools())

	for _, fill := range []float64{1.5, -2} {
		src := tensor.Zeros(tensor.Float64, 3)
		require.NoError(t, src.Fill(fill))
		st := src.Storage()
		dst := make([]tensor.Tensor, 2)
		require.NoError(t, vs.Over(dst, st))
		got, err := tensor.Data[float64](&dst[1])
		require.NoError(t, err)
		assert.Equal(t, []float64{fill, fill}, got)
		assert.Equal(t, []int{2}, dst[0].Shape())
		assert.Same(t, st, dst[0].Storage())
	}

	err = vs.Over(make([]tensor.Tensor, 2), tensor.NewStorage(16))
	assert.ErrorContains(t, err, "the views need 24 bytes")

	tr, err := tensor.Zeros(tensor.Float32, 2, 2).Transpose(0, 1)
	require.NoError(t, err)
	vs, err = tensorx.NewViewSet([]tensor.Tensor{*tr})
	assert.ErrorContains(t, err, "not contiguous")
	assert.Nil(t, vs, "no set on error, not a typed nil")
}

// TestFromStorageInto builds a view whose shape and strides live in
// memory the caller gave.
func TestFromStorageInto(t *testing.T) {
	st := tensor.NewStorage(48)
	dims := make([]int, 4)
	var v tensor.Tensor
	require.NoError(t, tensorx.FromStorageInto(&v, dims, tensor.Float32, st, 8, 2, 5))
	assert.Equal(t, []int{2, 5}, v.Shape())
	assert.Equal(t, []int{2, 5, 5, 1}, dims, "shape and strides in dims")
	assert.Equal(t, 8, v.Offset())
	err := tensorx.FromStorageInto(&v, nil, tensor.Float64, st, 0, 7)
	assert.ErrorContains(t, err, "needs bytes [0, 56)")
	assert.Equal(t, []int{2, 5}, v.Shape(), "unchanged on error")
}

// TestReusable: only storages over the receive pool's memory are.
func TestReusable(t *testing.T) {
	assert.False(t, tensorx.Reusable(tensor.NewStorage(8)))
	b, err := mem.Recv(64)
	require.NoError(t, err)
	st := rawbytes.Reusable(b).(*tensor.Storage)
	assert.True(t, tensorx.Reusable(st))
	require.NoError(t, st.Release())
}

// A ViewSet lays the views of one layout over each new storage.
func ExampleNewViewSet() {
	layout := tensor.NewStorage(16)
	a, _ := tensor.FromStorage(tensor.Float32, layout, 0, 2)
	b, _ := tensor.FromStorage(tensor.Int64, layout, 8)
	vs, err := tensorx.NewViewSet([]tensor.Tensor{*a, *b})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := tensor.FromSlice([]int64{1 << 32, 7})
	views := make([]tensor.Tensor, vs.Len())
	if err := vs.Over(views, src.Storage()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(views[1].String())
	// Output: int64[] 7
}
