// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// block is rank r's contribution of n elements to a gather.
func block[T Scalar](r, n int) []T {
	return fill[T](n, func(i int) int64 { return int64(r*10 + i) })
}

// blocks concatenates block(0..size-1, n).
func blocks[T Scalar](size, n int) []T {
	var all []T
	for r := range size {
		all = append(all, block[T](r, n)...)
	}
	return all
}

func bcastCase[T Scalar](t *testing.T, c *Comm) {
	r, s := c.Rank(), c.Size()
	for root := range s {
		buf := make([]T, 9)
		if r == root {
			buf = block[T](root+1, 9)
		}
		assert.NoError(t, Bcast(c, buf, root))
		assert.Equal(t, block[T](root+1, 9), buf, "root %d", root)
	}
}

func TestBcast(t *testing.T) {
	c := testComm(t)
	t.Run("int8", func(t *testing.T) { bcastCase[int8](t, c) })
	t.Run("uint16", func(t *testing.T) { bcastCase[uint16](t, c) })
	t.Run("int", func(t *testing.T) { bcastCase[int](t, c) })
	t.Run("float32", func(t *testing.T) { bcastCase[float32](t, c) })
	t.Run("complex128", func(t *testing.T) { bcastCase[complex128](t, c) })
	t.Run("bool", func(t *testing.T) { bcastCase[bool](t, c) })
}

func gatherCase[T Scalar](t *testing.T, c *Comm) {
	const n = 3
	r, s := c.Rank(), c.Size()
	root := s - 1
	mine := block[T](r, n)
	all := blocks[T](s, n)

	var recv []T
	if r == root {
		recv = make([]T, s*n)
	}
	assert.NoError(t, Gather(c, mine, recv, root))
	if r == root {
		assert.Equal(t, all, recv, "Gather")
		inplace := make([]T, s*n)
		copy(inplace[r*n:], mine)
		assert.NoError(t, GatherInPlace(c, inplace, root))
		assert.Equal(t, all, inplace, "Gather in place")
	} else {
		assert.NoError(t, GatherInPlace(c, mine, root))
	}

	got := make([]T, s*n)
	assert.NoError(t, Allgather(c, mine, got))
	assert.Equal(t, all, got, "Allgather")
	got = make([]T, s*n)
	copy(got[r*n:], mine)
	assert.NoError(t, AllgatherInPlace(c, got))
	assert.Equal(t, all, got, "Allgather in place")

	// Scatter from root: rank i gets block i.
	var send []T
	if r == root {
		send = all
	}
	part := make([]T, n)
	assert.NoError(t, Scatter(c, send, part, root))
	assert.Equal(t, mine, part, "Scatter")
	if r == root {
		assert.NoError(t, ScatterInPlace(c, append([]T(nil), all...), root))
	} else {
		clear(part)
		assert.NoError(t, ScatterInPlace(c, part, root))
		assert.Equal(t, mine, part, "Scatter in place")
	}

	// Alltoall: block j of rank r's send is r*10+j; rank r receives j*10+r.
	a2a := make([]T, s*n)
	for j := range s {
		copy(a2a[j*n:], fill[T](n, func(i int) int64 { return int64(r*10 + j + i) }))
	}
	want := make([]T, s*n)
	for j := range s {
		copy(want[j*n:], fill[T](n, func(i int) int64 { return int64(j*10 + r + i) }))
	}
	got = make([]T, s*n)
	assert.NoError(t, Alltoall(c, a2a, got))
	assert.Equal(t, want, got, "Alltoall")
	assert.NoError(t, AlltoallInPlace(c, a2a))
	assert.Equal(t, want, a2a, "Alltoall in place")
}

func gathervCase[T Scalar](t *testing.T, c *Comm) {
	r, s := c.Rank(), c.Size()
	root := 0
	// Rank i contributes i+1 elements; blocks are laid out in reverse rank
	// order with one gap element before each.
	counts := make([]int, s)
	displs := make([]int, s)
	total := 0
	for i := s - 1; i >= 0; i-- {
		counts[i] = i + 1
		displs[i] = total + 1
		total += i + 2
	}
	want := make([]T, total)
	for i := range s {
		copy(want[displs[i]:], block[T](i, counts[i]))
	}
	mine := block[T](r, r+1)

	var recv []T
	if r == root {
		recv = make([]T, total)
	}
	assert.NoError(t, Gatherv(c, mine, recv, counts, displs, root))
	if r == root {
		assert.Equal(t, want, recv, "Gatherv")
	}

	got := make([]T, total)
	assert.NoError(t, Allgatherv(c, mine, got, counts, displs))
	assert.Equal(t, want, got, "Allgatherv")
	got = make([]T, total)
	copy(got[displs[r]:], mine)
	assert.NoError(t, AllgathervInPlace(c, got, counts, displs))
	assert.Equal(t, want, got, "Allgatherv in place")

	packed := make([]T, (s*(s+1))/2)
	assert.NoError(t, Allgatherv(c, mine, packed, counts, nil))
	var wantPacked []T
	for i := range s {
		wantPacked = append(wantPacked, block[T](i, i+1)...)
	}
	assert.Equal(t, wantPacked, packed, "Allgatherv packed")

	var send []T
	if r == root {
		send = want
	}
	part := make([]T, r+1)
	assert.NoError(t, Scatterv(c, send, counts, displs, part, root))
	assert.Equal(t, mine, part, "Scatterv")
	if r == root {
		assert.NoError(t, ScattervInPlace(c, append([]T(nil), want...), counts, displs, root))
		inplace := make([]T, total)
		copy(inplace[displs[r]:], mine)
		assert.NoError(t, GathervInPlace(c, inplace, counts, displs, root))
		assert.Equal(t, want, inplace, "Gatherv in place")
	} else {
		clear(part)
		assert.NoError(t, ScattervInPlace(c, part, counts, displs, root))
		assert.Equal(t, mine, part, "Scatterv in place")
		assert.NoError(t, GathervInPlace(c, mine, counts, displs, root))
	}
}

func TestGatherFamily(t *testing.T) {
	c := testComm(t)
	t.Run("int32", func(t *testing.T) { gatherCase[int32](t, c) })
	t.Run("float64", func(t *testing.T) { gatherCase[float64](t, c) })
	t.Run("complex64", func(t *testing.T) { gatherCase[complex64](t, c) })
	t.Run("v/int64", func(t *testing.T) { gathervCase[int64](t, c) })
	t.Run("v/float32", func(t *testing.T) { gathervCase[float32](t, c) })
}

func TestGatherArgs(t *testing.T) {
	c := World()
	r, s := c.Rank(), c.Size()
	assert.ErrorIs(t, Allgather(c, []int{1}, make([]int, s+1)), ErrBuffer)
	assert.ErrorIs(t, Alltoall(c, []int{1}, make([]int, 2)), ErrBuffer)
	assert.ErrorIs(t, Allgatherv(c, []int{1}, make([]int, s), make([]int, s+1), nil), ErrCount)
	counts := make([]int, s)
	for i := range counts {
		counts[i] = 1
	}
	counts[r] = 2
	assert.ErrorIs(t, Allgatherv(c, []int{1, 2}, make([]int, s), counts, nil), ErrCount, "blocks overflow the buffer")
	assert.ErrorIs(t, Gather(c, []int{1}, nil, -1), ErrRoot)
}
