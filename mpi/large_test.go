// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestChunks: chunks cuts n elements into consecutive pieces of at most
// size, the last one shorter, and calls f once with an empty piece for
// n = 0; an error from f stops it. The reductions cut at reduceChunk
// (2^30 elements), which the big tests (TDMPI_BIG=1) cross with 2.5 GiB.
func TestChunks(t *testing.T) {
	for _, c := range []struct {
		n, size int
		want    [][2]int // off, m
	}{
		{0, 700, [][2]int{{0, 0}}},
		{1, 700, [][2]int{{0, 1}}},
		{699, 700, [][2]int{{0, 699}}},
		{700, 700, [][2]int{{0, 700}}},
		{701, 700, [][2]int{{0, 700}, {700, 1}}},
		{2100, 700, [][2]int{{0, 700}, {700, 700}, {1400, 700}}},
		{2345, 700, [][2]int{{0, 700}, {700, 700}, {1400, 700}, {2100, 245}}},
		{5 << 29, reduceChunk, [][2]int{{0, 1 << 30}, {1 << 30, 1 << 30}, {2 << 30, 1 << 29}}},
	} {
		var got [][2]int
		err := chunks(c.n, c.size, func(off, m int) error {
			got = append(got, [2]int{off, m})
			return nil
		})
		assert.NoError(t, err)
		assert.Equal(t, c.want, got, "chunks(%d, %d)", c.n, c.size)
	}
	stop := errors.New("stop")
	calls := 0
	err := chunks(2345, 700, func(off, m int) error {
		calls++
		if off == 700 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 2, calls, "chunks went on after an error")
}
