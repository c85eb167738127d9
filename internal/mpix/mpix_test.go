// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpix_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/mpi"
)

func TestMain(m *testing.M) { mpitest.Main(m) }

// level is a named Scalar type: package mpi learns its element type from
// reflection here, where its generic functions use a type switch.
type level int16

// bcastCase broadcasts n elements of T from root with IbcastUntil and
// checks every rank got root's values; want(i) is element i at root.
func bcastCase[T mpi.Scalar](t *testing.T, c *mpi.Comm, n, root int, want func(i int) T) {
	t.Helper()
	buf := make([]T, n)
	if c.Rank() == root {
		for i := range buf {
			buf[i] = want(i)
		}
	}
	ended, err := mpix.IbcastUntil(c, buf, root, nil)
	require.NoError(t, err)
	assert.False(t, ended)
	for i, v := range buf {
		if !assert.Equal(t, want(i), v, "element %d of %T", i, buf) {
			break
		}
	}
}

// TestIbcastUntil broadcasts buffers of several element types, a named
// one included, and lengths, through the untyped bytes package mpi
// receives them as.
func TestIbcastUntil(t *testing.T) {
	g := mpitest.Need(t, 2)
	c := g.Comm()
	root := g.Size() - 1
	for _, n := range []int{0, 1, 7, 5000} {
		bcastCase(t, c, n, root, func(i int) byte { return byte(i * 7) })
		bcastCase(t, c, n, root, func(i int) float64 { return float64(i) + 0.5 })
		bcastCase(t, c, n, root, func(i int) level { return level(-i) })
		bcastCase(t, c, n, root, func(i int) bool { return i%3 == 0 })
		bcastCase(t, c, n, root, func(i int) complex64 { return complex(float32(i), -1) })
	}
	_, err := mpix.IbcastUntil(c, []int32{1}, g.Size(), nil)
	assert.ErrorIs(t, err, mpi.ErrRoot, "a root out of range")
}

// TestIallreduceInPlaceUntil reduces buffers of several element types,
// whose operation package mpi checks against the element type it is told.
func TestIallreduceInPlaceUntil(t *testing.T) {
	g := mpitest.Need(t, 2)
	c := g.Comm()
	r, size := g.Rank(), g.Size()
	sum := size * (size - 1) / 2

	ints := []int32{int32(r), 1, -int32(r)}
	ended, err := mpix.IallreduceInPlaceUntil(c, ints, mpi.OpSum, nil)
	require.NoError(t, err)
	assert.False(t, ended)
	assert.Equal(t, []int32{int32(sum), int32(size), -int32(sum)}, ints)

	floats := []float32{float32(r) / 2, -float32(r)}
	_, err = mpix.IallreduceInPlaceUntil(c, floats, mpi.OpMax, nil)
	require.NoError(t, err)
	assert.Equal(t, []float32{float32(size-1) / 2, 0}, floats)

	levels := []level{level(r + 1)}
	_, err = mpix.IallreduceInPlaceUntil(c, levels, mpi.OpProd, nil)
	require.NoError(t, err)
	want := level(1)
	for i := 1; i <= size; i++ {
		want *= level(i)
	}
	assert.Equal(t, []level{want}, levels)

	_, err = mpix.IallreduceInPlaceUntil(c, []float64{1}, mpi.OpBand, nil)
	assert.ErrorIs(t, err, mpi.ErrOp, "a bitwise operation on floats")
}

// TestSendCopyRecvExact sends a message from a copy and one in two blocks
// from rank 0 to rank 1, which receives the first with RecvExact and the
// second with MrecvConcat, all through this package's function values.
func TestSendCopyRecvExact(t *testing.T) {
	g := mpitest.Need(t, 2)
	c := g.Comm()
	const tag = 71
	small := []byte("from a copy")
	head, tail := []byte("head|"), bytes.Repeat([]byte{9}, 3000)
	switch g.Rank() {
	case 0:
		sent, err := mpix.SendCopy(c, small, 1, tag)
		require.NoError(t, err)
		assert.True(t, sent)
		require.NoError(t, mpix.SendConcat(c, head, tail, 1, tag))
		n, err := mpix.WaitCopies(10 * time.Second)
		assert.NoError(t, err)
		assert.Zero(t, n, "sends of copies still in flight")
	case 1:
		var m mpi.Message
		buf := make([]byte, len(small))
		st, got, err := mpix.RecvExact(&m, c, buf, 0, tag)
		require.NoError(t, err)
		require.True(t, got, "a message of %d bytes", st.Bytes())
		assert.Equal(t, small, buf)

		st, ended, err := mpix.MprobeUntil(&m, c, 0, tag, nil)
		require.NoError(t, err)
		require.False(t, ended)
		require.EqualValues(t, len(head)+len(tail), st.Bytes())
		a, b := make([]byte, len(head)), make([]byte, len(tail))
		_, err = mpix.MrecvConcat(&m, a, b)
		require.NoError(t, err)
		assert.Equal(t, head, a)
		assert.Equal(t, tail, b)
	}
}

// TestSendBlocksUntil sends blocks (empty ones among them, two blocks in
// one allocation) from rank 0 to rank 1 as one message, which rank 1
// receives whole: their concatenation. A send rank 1 takes only after
// done closed is abandoned (ended) and still delivered, its blocks intact.
func TestSendBlocksUntil(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	c := g.Comm()
	const tag = 73
	big := bytes.Repeat([]byte{1, 2, 3}, 40000)
	shared := bytes.Repeat([]byte("shared"), 2000)
	blocks := [][]byte{[]byte("first"), nil, big, shared[:100], {}, shared[5000:], []byte("last")}
	cases := []struct {
		name   string
		blocks [][]byte
		late   bool // rank 1 receives after done closed
	}{
		{"blocks", blocks, false},
		{"one block", [][]byte{nil, big}, false},
		{"abandoned", blocks, true},
	}
	for _, tc := range cases {
		var w []byte
		for _, b := range tc.blocks {
			w = append(w, b...)
		}
		switch g.Rank() {
		case 0:
			done := make(chan struct{})
			if tc.late {
				close(done)
			}
			ended, err := mpix.SendBlocksUntil(c, tc.blocks, 1, tag, done)
			require.NoError(t, err, tc.name)
			if tc.late {
				assert.True(t, ended, "%s: given up before rank 1 received", tc.name)
			} else {
				assert.False(t, ended, tc.name)
			}
			require.NoError(t, c.Barrier())
		case 1:
			if tc.late {
				require.NoError(t, c.Barrier()) // rank 0 has given up
			}
			got := make([]byte, len(w))
			st, err := mpi.Recv(c, got, 0, tag)
			require.NoError(t, err, tc.name)
			assert.EqualValues(t, len(w), st.Bytes(), tc.name)
			assert.Equal(t, w, got, tc.name)
			if !tc.late {
				require.NoError(t, c.Barrier())
			}
		}
	}
	if g.Rank() == 0 {
		n, err := mpix.WaitCopies(10 * time.Second)
		assert.NoError(t, err)
		assert.Zero(t, n)
	}
}

// TestUntilEnds: a probe for a message that never comes returns ended
// once done is closed, having matched nothing.
func TestUntilEnds(t *testing.T) {
	g := mpitest.Need(t, 1)
	done := make(chan struct{})
	time.AfterFunc(20*time.Millisecond, func() { close(done) })
	var m mpi.Message
	_, ended, err := mpix.MprobeUntil(&m, g.Comm(), mpi.AnySource, 72, done)
	require.NoError(t, err)
	assert.True(t, ended)
	assert.Zero(t, mpix.InFlight(), "operations in flight after a probe")
}

// SendConcat sends two buffers as one message, which a receiver takes in
// one piece or, with MrecvConcat, in two.
func ExampleSendConcat() {
	c := mpi.Self()
	if err := mpix.SendConcat(c, []byte("tdmpi "), []byte("header"), 0, 5); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 64)
	st, err := mpi.Recv(c, buf, 0, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", buf[:st.Bytes()])
	// Output: "tdmpi header"
}

// TestNoAllocs: a receive into a Message on the caller's stack allocates
// nothing, although package mpi's functions are reached through function
// values, through which a pointer would escape to the heap.
func TestNoAllocs(t *testing.T) {
	mpitest.Need(t, 1)
	self := mpi.Self()
	msg, buf := []byte("12345678"), make([]byte, 8)
	allocs := testing.AllocsPerRun(200, func() {
		var m mpi.Message
		err := mpi.Send(self, msg, 0, 9)
		if err == nil {
			_, _, err = mpix.MprobeUntil(&m, self, 0, 9, nil)
		}
		if err == nil {
			_, _, err = mpix.MrecvUntil(&m, buf, nil)
		}
		if err == nil {
			err = mpi.Send(self, msg, 0, 9)
		}
		if err == nil {
			_, _, err = mpix.RecvExact(&m, self, buf, 0, 9)
		}
		if err == nil {
			err = mpix.SendConcat(self, msg[:3], msg[3:], 0, 9)
		}
		if err == nil {
			_, _, err = mpix.MprobeUntil(&m, self, 0, 9, nil)
		}
		if err == nil {
			_, err = mpix.MrecvConcat(&m, buf[:5], buf[5:])
		}
		if err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs, "allocations per round")
	assert.Equal(t, msg, buf)

	_, err := mpix.MrecvConcat(nil, buf, nil)
	assert.ErrorIs(t, err, mpi.ErrRequest, "a nil Message")
	_, _, err = mpix.MrecvUntil(nil, buf, nil)
	assert.ErrorIs(t, err, mpi.ErrRequest, "a nil Message")
}
