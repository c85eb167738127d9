// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A boxed is a buffer inside a Go object that also holds an unpinned Go
// pointer, as a small received TensorDict keeps its storage in one
// allocation with its tree. cgo checks a void * argument as the whole
// object it points into, and panicked on such a buffer ("Go pointer to
// unpinned Go pointer"); every call that hands MPI a buffer passes it as
// a char pointer, which cgo does not check.
type boxed struct {
	tree *[]int
	data [16]int32
}

// box returns a boxed holding v first, and its buffer of len(v) elements.
func box(v []int32) []int32 {
	b := &boxed{tree: new([]int)}
	copy(b.data[:], v)
	return b.data[:len(v)]
}

// boxedBytes is box for bytes.
func boxedBytes(v []byte) []byte {
	b := &struct {
		tree *[]int
		data [64]byte
	}{tree: new([]int)}
	copy(b.data[:], v)
	return b.data[:len(v)]
}

// seq returns n values f(i).
func seq(n int, f func(i int) int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

// TestBoxedBuffers runs every call that passes MPI a buffer on buffers
// inside objects with Go pointers (boxed), checking its results.
func TestBoxedBuffers(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	const m = 2 // elements per rank's block
	root := s - 1
	mine := seq(m, func(i int) int32 { return int32(r*10 + i) })          // rank r's block
	all := seq(s*m, func(i int) int32 { return int32(i/m*10 + i%m) })     // every rank's block, in order
	sum := seq(m, func(i int) int32 { return int32(s*(s-1)/2*10 + s*i) }) // the sum of the blocks
	prefix := seq(m, func(i int) int32 { return int32(r*(r+1)/2*10 + (r+1)*i) })
	wait := func(q *Request, err error) error {
		if err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	}
	counts := make([]int, s)
	for i := range counts {
		counts[i] = m
	}
	// atRoot is v at root, and elsewhere mine: the send buffer there, or
	// a buffer that must stay as it is.
	atRoot := func(v []int32) []int32 {
		if r == root {
			return v
		}
		return mine
	}
	// rootOnly is all at root and zeros elsewhere.
	rootOnly := func() []int32 {
		if r == root {
			return all
		}
		return make([]int32, s*m)
	}
	// ownBlock is a buffer of all's size holding mine in its block.
	ownBlock := func() []int32 {
		b := box(make([]int32, s*m))
		copy(b[r*m:], mine)
		return b
	}

	for _, tc := range []struct {
		name string
		run  func() ([]int32, error) // the call; the buffer to check
		want []int32
	}{
		{"Bcast", func() ([]int32, error) {
			b := box(rootOnly())
			return b, Bcast(c, b, root)
		}, all},
		{"Ibcast", func() ([]int32, error) {
			b := box(rootOnly())
			return b, wait(Ibcast(c, b, root))
		}, all},
		{"ibcastWait", func() ([]int32, error) {
			b := box(rootOnly())
			return b, ibcastWait(c, b, root)
		}, all},
		{"Allreduce", func() ([]int32, error) {
			b := box(make([]int32, m))
			return b, Allreduce(c, box(mine), b, OpSum)
		}, sum},
		{"AllreduceInPlace", func() ([]int32, error) {
			b := box(mine)
			return b, AllreduceInPlace(c, b, OpSum)
		}, sum},
		{"Iallreduce", func() ([]int32, error) {
			b := box(make([]int32, m))
			return b, wait(Iallreduce(c, box(mine), b, OpSum))
		}, sum},
		{"IallreduceInPlace", func() ([]int32, error) {
			b := box(mine)
			return b, wait(IallreduceInPlace(c, b, OpSum))
		}, sum},
		{"iallreduceInPlaceWait", func() ([]int32, error) {
			b := box(mine)
			return b, iallreduceInPlaceWait(c, b, OpSum)
		}, sum},
		{"Reduce", func() ([]int32, error) {
			b := box(mine)
			return b, Reduce(c, box(mine), b, OpSum, root)
		}, atRoot(sum)},
		{"ReduceInPlace", func() ([]int32, error) {
			b := box(mine)
			return b, ReduceInPlace(c, b, OpSum, root)
		}, atRoot(sum)},
		{"Ireduce", func() ([]int32, error) {
			b := box(mine)
			return b, wait(Ireduce(c, box(mine), b, OpSum, root))
		}, atRoot(sum)},
		{"IreduceInPlace", func() ([]int32, error) {
			b := box(mine)
			return b, wait(IreduceInPlace(c, b, OpSum, root))
		}, atRoot(sum)},
		{"Scan", func() ([]int32, error) {
			b := box(make([]int32, m))
			return b, Scan(c, box(mine), b, OpSum)
		}, prefix},
		{"ScanInPlace", func() ([]int32, error) {
			b := box(mine)
			return b, ScanInPlace(c, b, OpSum)
		}, prefix},
		{"Gather", func() ([]int32, error) {
			b := box(make([]int32, s*m))
			return atRoot(b), Gather(c, box(mine), b, root)
		}, atRoot(all)},
		{"GatherInPlace", func() ([]int32, error) {
			b := box(mine)
			if r == root {
				b = ownBlock()
			}
			return b, GatherInPlace(c, b, root)
		}, atRoot(all)},
		{"Allgather", func() ([]int32, error) {
			b := box(make([]int32, s*m))
			return b, Allgather(c, box(mine), b)
		}, all},
		{"AllgatherInPlace", func() ([]int32, error) {
			b := ownBlock()
			return b, AllgatherInPlace(c, b)
		}, all},
		{"Scatter", func() ([]int32, error) {
			b := box(make([]int32, m))
			return b, Scatter(c, box(atRoot(all)), b, root)
		}, mine},
		{"ScatterInPlace", func() ([]int32, error) {
			if r != root {
				b := box(make([]int32, m))
				return b, ScatterInPlace(c, b, root)
			}
			b := box(all)
			return b[r*m : r*m+m], ScatterInPlace(c, b, root)
		}, mine},
		{"Alltoall", func() ([]int32, error) {
			// Block j of rank r's send is all's block r; rank r gets
			// block r of every rank's, all's block j from rank j.
			send := box(seq(s*m, func(i int) int32 { return mine[i%m] }))
			b := box(make([]int32, s*m))
			return b, Alltoall(c, send, b)
		}, all},
		{"AlltoallInPlace", func() ([]int32, error) {
			b := box(seq(s*m, func(i int) int32 { return mine[i%m] }))
			return b, AlltoallInPlace(c, b)
		}, all},
		{"Gatherv", func() ([]int32, error) {
			b := box(make([]int32, s*m))
			return atRoot(b), Gatherv(c, box(mine), b, counts, nil, root)
		}, atRoot(all)},
		{"GathervInPlace", func() ([]int32, error) {
			b := box(mine)
			if r == root {
				b = ownBlock()
			}
			return b, GathervInPlace(c, b, counts, nil, root)
		}, atRoot(all)},
		{"Igatherv", func() ([]int32, error) {
			b := box(make([]int32, s*m))
			return atRoot(b), wait(Igatherv(c, box(mine), b, counts, nil, root))
		}, atRoot(all)},
		{"Allgatherv", func() ([]int32, error) {
			b := box(make([]int32, s*m))
			return b, Allgatherv(c, box(mine), b, counts, nil)
		}, all},
		{"AllgathervInPlace", func() ([]int32, error) {
			b := ownBlock()
			return b, AllgathervInPlace(c, b, counts, nil)
		}, all},
		{"Iallgatherv", func() ([]int32, error) {
			b := box(make([]int32, s*m))
			return b, wait(Iallgatherv(c, box(mine), b, counts, nil))
		}, all},
		{"Scatterv", func() ([]int32, error) {
			b := box(make([]int32, m))
			return b, Scatterv(c, box(atRoot(all)), counts, nil, b, root)
		}, mine},
		{"Iscatterv", func() ([]int32, error) {
			b := box(make([]int32, m))
			return b, wait(Iscatterv(c, box(atRoot(all)), counts, nil, b, root))
		}, mine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run()
			if assert.NoError(t, err) {
				assert.Equal(t, tc.want, got)
			}
		})
	}

	// Point to point, around the ring: rank r sends mine to r+1 and
	// receives rank r-1's block.
	next, prev := (r+1)%s, (r+s-1)%s
	from := seq(m, func(i int) int32 { return int32(prev*10 + i) })
	t.Run("Send and Recv", func(t *testing.T) {
		b := box(make([]int32, m))
		q, err := Irecv(c, b, prev, 1)
		assert.NoError(t, err)
		assert.NoError(t, Send(c, box(mine), next, 1))
		assert.NoError(t, wait(q, nil))
		assert.Equal(t, from, b)
	})
	t.Run("Isend and Recv", func(t *testing.T) {
		q, err := Isend(c, box(mine), next, 2)
		assert.NoError(t, err)
		b := box(make([]int32, m))
		_, err = Recv(c, b, prev, 2)
		assert.NoError(t, err)
		assert.NoError(t, wait(q, nil))
		assert.Equal(t, from, b)
	})
	t.Run("Sendrecv", func(t *testing.T) {
		b := box(make([]int32, m))
		_, err := Sendrecv(c, box(mine), next, 3, b, prev, 3)
		assert.NoError(t, err)
		assert.Equal(t, from, b)
	})
	t.Run("Imrecv", func(t *testing.T) {
		q, err := Isend(c, box(mine), next, 4)
		assert.NoError(t, err)
		msg, _, err := Mprobe(c, prev, 4)
		assert.NoError(t, err)
		b := box(make([]int32, m))
		assert.NoError(t, wait(Imrecv(msg, b)))
		assert.NoError(t, wait(q, nil))
		assert.Equal(t, from, b)
	})
	t.Run("sendUntil and mrecvUntil", func(t *testing.T) {
		want := []byte{byte(prev), 1, 2, 3}
		done := make(chan struct{})
		ended, err := sendUntil(c, boxedBytes([]byte{byte(r), 1, 2, 3}), next, 5, done)
		assert.NoError(t, err)
		assert.False(t, ended)
		msg, _, err := Mprobe(c, prev, 5)
		assert.NoError(t, err)
		b := boxedBytes(make([]byte, 4))
		_, ended, err = mrecvUntil(msg, b, done)
		assert.NoError(t, err)
		assert.False(t, ended)
		assert.Equal(t, want, b)
	})
}
