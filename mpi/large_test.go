// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallLarge lowers the large-count thresholds so that buffers of a few
// thousand elements take the derived-datatype and chunked-reduction paths
// that 2^31 elements take in production. Every rank does the same.
func smallLarge(t *testing.T) {
	th, bl, rc := bigThreshold, bigBlock, reduceChunk
	bigThreshold, bigBlock, reduceChunk = 1000, 300, 700
	t.Cleanup(func() { bigThreshold, bigBlock, reduceChunk = th, bl, rc })
}

func TestLargePathsSmallBuffers(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	smallLarge(t)
	r, s := c.Rank(), c.Size()
	for _, n := range []int{1000, 1001, 2100, 2345} { // remainder 0 and not
		want := fill[float64](n, func(i int) int64 { return int64(i*3 + n) })
		// Point to point: even to odd neighbour, one message each way.
		switch {
		case r%2 == 0 && r+1 < s:
			assert.NoError(t, Send(c, want, r+1, 1))
			got := make([]float64, n)
			req, err := Irecv(c, got, r+1, 2)
			require.NoError(t, err)
			st, err := req.Wait()
			assert.NoError(t, err)
			assert.Equal(t, n, Count[float64](st))
			assert.Equal(t, want, got, "Isend/Irecv n=%d", n)
		case r%2 == 1:
			m, st, err := Mprobe(c, r-1, 1)
			require.NoError(t, err)
			assert.Equal(t, n, Count[float64](st), "probed size n=%d", n)
			got := make([]float64, n+7) // a longer buffer takes the message too
			st, err = Mrecv(m, got)
			assert.NoError(t, err)
			assert.Equal(t, n, Count[float64](st))
			assert.Equal(t, want, got[:n], "Send/Mrecv n=%d", n)
			req, err := Isend(c, want, r-1, 2)
			require.NoError(t, err)
			_, err = req.Wait()
			assert.NoError(t, err)
		}
		// A message over the threshold does not fit a small receive.
		if r%2 == 0 && r+1 < s {
			assert.NoError(t, Send(c, want, r+1, 3))
		} else if r%2 == 1 {
			_, err := Recv(c, make([]float64, 999), r-1, 3)
			assert.ErrorIs(t, err, ErrTruncate)
		}

		buf := make([]float64, n)
		if r == 0 {
			copy(buf, want)
		}
		assert.NoError(t, Bcast(c, buf, 0))
		assert.Equal(t, want, buf, "Bcast n=%d", n)

		mine := fill[int32](n, func(i int) int64 { return int64(i + r) })
		sum := fill[int32](n, func(i int) int64 { return int64(s*i + s*(s-1)/2) })
		got := make([]int32, n)
		assert.NoError(t, Allreduce(c, mine, got, OpSum))
		assert.Equal(t, sum, got, "Allreduce n=%d", n)
		copy(got, mine)
		assert.NoError(t, AllreduceInPlace(c, got, OpSum))
		assert.Equal(t, sum, got, "Allreduce in place n=%d", n)
		copy(got, mine)
		assert.NoError(t, ReduceInPlace(c, got, OpSum, 0))
		if r == 0 {
			assert.Equal(t, sum, got, "Reduce in place n=%d", n)
		} else {
			assert.Equal(t, mine, got, "Reduce in place n=%d leaves a non-root's buffer alone", n)
		}

		// Sendrecv around the ring.
		ring := make([]float64, n)
		left := (r - 1 + s) % s
		_, err := Sendrecv(c, fill[float64](n, func(i int) int64 { return int64(i + r) }), (r+1)%s, 4, ring, left, 4)
		assert.NoError(t, err)
		assert.Equal(t, fill[float64](n, func(i int) int64 { return int64(i + left) }), ring, "Sendrecv n=%d", n)
	}
}
