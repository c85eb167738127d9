// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNonblockingCollectives(t *testing.T) {
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	for _, n := range []int{0, 1, 1000, 1 << 16} {
		mine := fill[int64](n, func(i int) int64 { return int64(i*s + r) })
		sum := fill[int64](n, func(i int) int64 { return int64(s*s*i + s*(s-1)/2) })

		got := make([]int64, n)
		q1, err := Iallreduce(c, mine, got, OpSum)
		require.NoError(t, err)
		inplace := slices.Clone(mine)
		q2, err := IallreduceInPlace(c, inplace, OpSum)
		require.NoError(t, err)
		runtime.GC() // the buffers are pinned: nothing may move or free them
		red := slices.Clone(mine)
		q3, err := IreduceInPlace(c, red, OpSum, s-1)
		require.NoError(t, err)
		var recv []int64
		if r == 0 {
			recv = make([]int64, n)
		}
		q4, err := Ireduce(c, mine, recv, OpSum, 0)
		require.NoError(t, err)
		bc := make([]int64, n)
		if r == 0 {
			copy(bc, sum)
		}
		q5, err := Ibcast(c, bc, 0)
		require.NoError(t, err)
		require.NoError(t, WaitAll(q1, q2, q3, q4, q5))
		assert.Equal(t, sum, got, "Iallreduce n=%d", n)
		assert.Equal(t, sum, inplace, "IallreduceInPlace n=%d", n)
		if r == s-1 {
			assert.Equal(t, sum, red, "IreduceInPlace at root n=%d", n)
		} else {
			assert.Equal(t, mine, red, "IreduceInPlace leaves a non-root's buffer n=%d", n)
		}
		if r == 0 {
			assert.Equal(t, sum, recv, "Ireduce n=%d", n)
		}
		assert.Equal(t, sum, bc, "Ibcast n=%d", n)
		st, err := q1.Wait()
		assert.NoError(t, err, "Wait after completion")
		assert.Equal(t, Status{}, st)
	}
	assert.Zero(t, inFlightOps())
}

func TestNonblockingGathers(t *testing.T) {
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	counts, displs, total := make([]int, s), make([]int, s), 0
	for i := range s {
		counts[i], displs[i] = i+1, total+1 // a gap before each block
		total += i + 2
	}
	want := make([]float32, total)
	for i := range s {
		copy(want[displs[i]:], fill[float32](i+1, func(j int) int64 { return int64(10*i + j) }))
	}
	mine := append([]float32(nil), want[displs[r]:displs[r]+counts[r]]...)

	got := make([]float32, total)
	q, err := Iallgatherv(c, mine, got, counts, displs)
	require.NoError(t, err)
	_, err = q.Wait()
	require.NoError(t, err)
	assert.Equal(t, want, got, "Iallgatherv")

	got = make([]float32, total)
	copy(got[displs[r]:], mine)
	q, err = IallgathervInPlace(c, got, counts, displs)
	require.NoError(t, err)
	for done := false; !done; {
		done, _, err = q.Test()
		require.NoError(t, err)
	}
	assert.Equal(t, want, got, "IallgathervInPlace")

	root := s - 1
	var recv []float32
	if r == root {
		recv = make([]float32, total)
	}
	q, err = Igatherv(c, mine, recv, counts, displs, root)
	require.NoError(t, err)
	_, err = q.Wait()
	require.NoError(t, err)
	part := make([]float32, counts[r])
	var send []float32
	if r == root {
		assert.Equal(t, want, recv, "Igatherv")
		send = want
	}
	q, err = Iscatterv(c, send, counts, displs, part, root)
	require.NoError(t, err)
	_, err = q.Wait()
	require.NoError(t, err)
	assert.Equal(t, mine, part, "Iscatterv")

	blk := slices.Clone(mine)
	if r == root {
		blk = make([]float32, total)
		copy(blk[displs[r]:], mine)
	}
	q, err = IgathervInPlace(c, blk, counts, displs, root)
	require.NoError(t, err)
	_, err = q.Wait()
	require.NoError(t, err)
	if r == root {
		assert.Equal(t, want, blk, "IgathervInPlace")
	} else {
		clear(blk)
	}
	q, err = IscattervInPlace(c, blk, counts, displs, root)
	require.NoError(t, err)
	_, err = q.Wait()
	require.NoError(t, err)
	if r != root {
		assert.Equal(t, mine, blk, "IscattervInPlace")
	}

	_, err = Iallreduce(c, []float64{1}, []float64{1}, OpBand)
	assert.ErrorIs(t, err, ErrOp)
	_, err = Ireduce(c, []int{1}, []int{1}, OpSum, s)
	assert.ErrorIs(t, err, ErrRoot)
	_, err = Iallgatherv(c, mine, got, counts[:len(counts)-1], nil) // one count short, at any size
	assert.ErrorIs(t, err, ErrCount)
	q, err = Ibcast(c, []int{1}, 0)
	require.NoError(t, err)
	assert.ErrorIs(t, q.Cancel(), ErrRequest, "collectives cannot be cancelled")
	_, err = q.Wait()
	require.NoError(t, err)
}

// bothForms runs one nonblocking collective in the two forms that must
// match each other: waited for within one call (within) on even ranks,
// started (start) then waited for through its Request on odd ones.
func bothForms(t *testing.T, rank int, within func() error, start func() (*Request, error)) {
	t.Helper()
	if rank%2 == 0 {
		require.NoError(t, within())
		return
	}
	q, err := start()
	require.NoError(t, err)
	_, err = q.Wait()
	require.NoError(t, err)
}

// TestIallreduceInPlaceWait: iallreduceInPlaceWait on some ranks matches
// IallreduceInPlace on the others (a sum and a maximum at lengths up to
// past the size whose wait pauses), allocates nothing, leaves nothing in
// flight, and checks its arguments.
func TestIallreduceInPlaceWait(t *testing.T) {
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	for _, n := range []int{0, 1, 3, pauseMaxBytes/8 + 1} {
		for _, op := range []Op{OpSum, OpMax} {
			buf := fill[int64](n, func(i int) int64 { return int64(i*s + r) })
			want := fill[int64](n, func(i int) int64 {
				if op == OpMax {
					return int64(i*s + s - 1)
				}
				return int64(i*s*s + s*(s-1)/2)
			})
			bothForms(t, r,
				func() error { return iallreduceInPlaceWait(c, buf, op) },
				func() (*Request, error) { return IallreduceInPlace(c, buf, op) })
			assert.Equal(t, want, buf, "n=%d op=%v", n, op)
		}
	}
	flag := []uint8{uint8(r % 2)}
	allocs := testing.AllocsPerRun(20, func() { require.NoError(t, iallreduceInPlaceWait(c, flag, OpMax)) })
	assert.Zero(t, allocs, "allocations per iallreduceInPlaceWait")
	assert.Equal(t, []uint8{uint8(min(s-1, 1))}, flag)
	assert.Zero(t, inFlightOps())
	assert.ErrorIs(t, iallreduceInPlaceWait(c, []int{1}, Op(-1)), ErrOp)
}

// TestIbcastWait: ibcastWait on some ranks matches Ibcast on the others
// (odd ranks wait through a Request, even ones within the call), for every
// root, sizes from none to past a paused wait's limit, and a derived
// datatype for complex elements; it leaves nothing in flight, and checks
// its root as Ibcast does.
func TestIbcastWait(t *testing.T) {
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	for _, n := range []int{0, 1, 4000, pauseMaxBytes/8 + 1} {
		for root := range s {
			want := fill[int64](n, func(i int) int64 { return int64(7*i + root) })
			buf := make([]int64, n)
			if r == root {
				copy(buf, want)
			}
			bothForms(t, r,
				func() error { return ibcastWait(c, buf, root) },
				func() (*Request, error) { return Ibcast(c, buf, root) })
			assert.Equal(t, want, buf, "n=%d root=%d", n, root)
		}
	}
	z := []complex128{complex(float64(r), 1), 2}
	require.NoError(t, ibcastWait(c, z, s-1))
	assert.Equal(t, []complex128{complex(float64(s-1), 1), 2}, z)
	assert.Zero(t, inFlightOps())
	assert.ErrorIs(t, ibcastWait(c, []int{1}, s), ErrRoot)
	assert.ErrorIs(t, ibcastWait(c, []int{1}, -1), ErrRoot)
}
