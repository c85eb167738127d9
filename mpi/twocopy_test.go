// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoCopyCase sends n elements from each even rank to the next odd rank
// (sendToOdd), which receives them into a contiguous buffer.
func twoCopyCase[T Scalar](n int) func(*testing.T, *Comm) {
	return func(t *testing.T, c *Comm) {
		sendToOdd(t, c, fill[T](n, func(i int) int64 { return pattern(i) + int64(i%3) }), 21)
	}
}

// TestTwoCopySends sends buffers of every element size as two blocks
// (the last element apart) and checks that contiguous receives get the
// same elements, from a few bytes over the threshold to several MiB.
func TestTwoCopySends(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	lo, hi := SetTwoCopySends(16, 0)
	t.Cleanup(func() { SetTwoCopySends(lo, hi) })
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *Comm)
	}{
		{"bool", twoCopyCase[bool](37)},
		{"uint8 17", twoCopyCase[uint8](17)},
		{"uint8 1MiB+3", twoCopyCase[uint8](1<<20 + 3)}, // 32 fragments: ranks may share cores
		{"int16", twoCopyCase[int16](37)},
		{"float32", twoCopyCase[float32](4097)},
		{"float64", twoCopyCase[float64](100001)},
		{"complex128", twoCopyCase[complex128](37)},
		{"uint8 at the threshold", twoCopyCase[uint8](16)}, // not split
		{"one element", twoCopyCase[complex128](1)},        // not split
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, c) })
	}
}

func TestTwoCopyRule(t *testing.T) {
	lo, hi := SetTwoCopySends(0, 0)
	t.Cleanup(func() { SetTwoCopySends(lo, hi) })
	tests := []struct {
		min, max int
		b        buffer
		want     bool
	}{
		{0, 0, bufOf(make([]byte, 1<<20)), false},
		{-5, 0, bufOf(make([]byte, 1<<20)), false},
		{4096, 0, bufOf(make([]byte, 4096)), false},
		{4096, 0, bufOf(make([]byte, 4097)), true},
		{4096, 0, bufOf(make([]float64, 513)), true},
		{4096, 8192, bufOf(make([]byte, 8192)), true},
		{4096, 8192, bufOf(make([]byte, 8193)), false},
		{4096, -1, bufOf(make([]byte, 1<<20)), true},
		{8, 0, bufOf(make([]complex128, 1)), false},
		{8, 0, bufOf(make([]complex128, 2)), true},
		{1, 0, bufOf([]byte(nil)), false},
	}
	for _, tt := range tests {
		SetTwoCopySends(tt.min, tt.max)
		assert.Equal(t, tt.want, twoCopy(tt.b), "bounds (%d, %d], %d elements of %d bytes", tt.min, tt.max, tt.b.n, tt.b.size)
	}
	SetTwoCopySends(3, 9)
	gotMin, gotMax := SetTwoCopySends(-3, 5)
	assert.Equal(t, [2]int{3, 9}, [2]int{gotMin, gotMax}, "the previous bounds")
	gotMin, gotMax = SetTwoCopySends(0, 0)
	assert.Equal(t, [2]int{0, 0}, [2]int{gotMin, gotMax}, "off after a min of 0 or less")
}

func TestParseTwoCopy(t *testing.T) {
	tests := []struct {
		in      string
		lo, hi  int
		wantErr string
	}{
		{"4KiB", 4096, 0, ""},
		{"4KiB-4MiB", 4096, 4 << 20, ""},
		{" 4096 - 8192 ", 4096, 8192, ""},
		{"0", 0, 0, ""},
		{"4MiB-4KiB", 0, 0, "upper bound is below"},
		{"lots", 0, 0, `"lots"`},
		{"4KiB-", 0, 0, `"4KiB-"`},
	}
	for _, tt := range tests {
		lo, hi, err := parseTwoCopy(tt.in)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, [2]int{tt.lo, tt.hi}, [2]int{lo, hi}, tt.in)
	}
}
