// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pattern(i int) int64 { return int64((i*7 + 3) % 5) }

// sendToOdd sends data from each even rank to the next odd rank, which
// receives it into a longer buffer and checks the status and the elements.
func sendToOdd[T Scalar](t *testing.T, c *Comm, data []T, tag int) {
	t.Helper()
	sendToOddWith(t, c, data, tag, func(dest int) error { return Send(c, data, dest, tag) })
}

// sendToOddWith is sendToOdd with the even ranks sending data to dest by
// calling send.
func sendToOddWith[T Scalar](t *testing.T, c *Comm, data []T, tag int, send func(dest int) error) {
	t.Helper()
	r, s := c.Rank(), c.Size()
	switch {
	case r%2 == 0 && r+1 < s:
		assert.NoError(t, send(r+1))
	case r%2 == 1:
		buf := make([]T, len(data)+5)
		st, err := Recv(c, buf, r-1, tag)
		assert.NoError(t, err)
		assert.Equal(t, r-1, st.Source)
		assert.Equal(t, tag, st.Tag)
		assert.Equal(t, len(data), Count[T](st))
		assert.Equal(t, data, buf[:len(data)])
	}
}

// sendRecvCase sends from each even rank to the next odd rank, then runs a
// Sendrecv ring over all ranks.
func sendRecvCase[T Scalar](t *testing.T, c *Comm) {
	const n, tag = 37, 11
	r, s := c.Rank(), c.Size()
	sendToOdd(t, c, fill[T](n, pattern), tag)

	mine := fill[T](n, func(i int) int64 { return pattern(i) + int64(r) })
	got := make([]T, n)
	left := (r - 1 + s) % s
	st, err := Sendrecv(c, mine, (r+1)%s, tag+1, got, left, tag+1)
	assert.NoError(t, err)
	assert.Equal(t, left, st.Source)
	assert.Equal(t, fill[T](n, func(i int) int64 { return pattern(i) + int64(left) }), got)
}

func TestSendRecvTypes(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *Comm)
	}{
		{"bool", sendRecvCase[bool]},
		{"myBool", sendRecvCase[myBool]},
		{"int8", sendRecvCase[int8]},
		{"uint8", sendRecvCase[uint8]},
		{"int16", sendRecvCase[int16]},
		{"uint16", sendRecvCase[uint16]},
		{"int32", sendRecvCase[int32]},
		{"uint32", sendRecvCase[uint32]},
		{"int64", sendRecvCase[int64]},
		{"uint64", sendRecvCase[uint64]},
		{"int", sendRecvCase[int]},
		{"uint", sendRecvCase[uint]},
		{"float32", sendRecvCase[float32]},
		{"float64", sendRecvCase[float64]},
		{"myFloat", sendRecvCase[myFloat]},
		{"complex64", sendRecvCase[complex64]},
		{"complex128", sendRecvCase[complex128]},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, c) })
	}
}

func TestSendRecvSelf(t *testing.T) {
	// A send to oneself must be nonblocking to avoid deadlock.
	c := Self()
	req, err := Isend(c, []float64{1.5, 2.5}, 0, 3)
	require.NoError(t, err)
	buf := make([]float64, 2)
	st, err := Recv(c, buf, AnySource, AnyTag)
	require.NoError(t, err)
	_, err = req.Wait()
	require.NoError(t, err)
	assert.Equal(t, []float64{1.5, 2.5}, buf)
	assert.Equal(t, 0, st.Source)
	assert.Equal(t, 3, st.Tag)
	assert.EqualValues(t, 16, st.Bytes())
	assert.EqualValues(t, 2, st.Count(8))
	assert.EqualValues(t, -1, st.Count(3))
	assert.Equal(t, 4, Count[float32](st))
}

func TestEmptyBuffers(t *testing.T) {
	c := Self()
	for _, send := range [][]int32{nil, {}} {
		for _, recv := range [][]int32{nil, {}, make([]int32, 4)} {
			req, err := Isend(c, send, 0, 1)
			require.NoError(t, err)
			st, err := Recv(c, recv, 0, 1)
			require.NoError(t, err)
			assert.Equal(t, 0, Count[int32](st))
			_, err = req.Wait()
			require.NoError(t, err)
		}
	}
	// Empty collectives on World, identical on every rank.
	w := testComm(t)
	assert.NoError(t, Bcast[float64](w, nil, 0))
	assert.NoError(t, Allreduce(w, []int64{}, []int64{}, OpSum))
	assert.NoError(t, AllreduceInPlace[int64](w, nil, OpSum))
	assert.NoError(t, Reduce(w, []float32{}, nil, OpMax, 0))
	assert.NoError(t, Allgather(w, []byte{}, nil))
	assert.NoError(t, AlltoallInPlace[byte](w, nil))

	// Ranks exchange empty messages in pairs.
	r, s := w.Rank(), w.Size()
	if r%2 == 0 && r+1 < s {
		assert.NoError(t, Send[uint16](w, nil, r+1, 2))
	} else if r%2 == 1 {
		st, err := Recv[uint16](w, nil, r-1, 2)
		assert.NoError(t, err)
		assert.EqualValues(t, 0, st.Bytes())
	}
}

func TestProcNull(t *testing.T) {
	c := World()
	require.NoError(t, Send(c, []int{1}, ProcNull, 0))
	st, err := Recv(c, make([]int, 1), ProcNull, AnyTag)
	require.NoError(t, err)
	assert.Equal(t, ProcNull, st.Source)
	assert.EqualValues(t, 0, st.Bytes())
}

func TestProbe(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	switch {
	case r%2 == 0 && r+1 < s:
		for tag := 1; tag <= 3; tag++ {
			assert.NoError(t, Send(c, fill[int16](10*tag, pattern), r+1, tag))
		}
	case r%2 == 1:
		// Probe a specific tag out of order, then receive exactly it.
		st, err := Probe(c, r-1, 3)
		assert.NoError(t, err)
		assert.Equal(t, 3, st.Tag)
		assert.EqualValues(t, 60, st.Bytes())
		buf := make([]int16, Count[int16](st))
		_, err = Recv(c, buf, st.Source, st.Tag)
		assert.NoError(t, err)
		assert.Equal(t, fill[int16](30, pattern), buf)
		for want := 1; want <= 2; want++ {
			var ok bool
			var st Status
			for deadline := time.Now().Add(30 * time.Second); !ok && err == nil && time.Now().Before(deadline); {
				ok, st, err = Iprobe(c, AnySource, AnyTag)
			}
			assert.NoError(t, err)
			assert.True(t, ok, "no message within 30 s")
			assert.Equal(t, want, st.Tag, "non-overtaking order")
			buf := make([]int16, Count[int16](st))
			_, err = Recv(c, buf, st.Source, st.Tag)
			assert.NoError(t, err)
			assert.Equal(t, fill[int16](10*want, pattern), buf)
		}
		ok, _, err := Iprobe(c, AnySource, AnyTag)
		assert.NoError(t, err)
		assert.False(t, ok, "no message left")
	}
}

// TestTruncateNoOverrun checks that a message longer than the receive
// buffer gives ErrTruncate, fills the buffer with its start and writes
// nothing past it (Open MPI's shared-memory transport would: see shim.h).
func TestTruncateNoOverrun(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	const short = 999
	for _, n := range []int{1000, 5000, 100000} { // eager and rendezvous sizes
		msg := fill[float64](n, func(i int) int64 { return int64(i + 1) })
		recvs := []func(buf []float64) error{
			func(buf []float64) error { _, err := Recv(c, buf, r-1, n); return err },
			func(buf []float64) error {
				m, _, err := Mprobe(c, r-1, n)
				if err != nil {
					return err
				}
				_, err = Mrecv(m, buf)
				return err
			},
			func(buf []float64) error { _, err := Sendrecv[float64](c, nil, r-1, n, buf, r-1, n); return err },
		}
		for i, recv := range recvs {
			switch {
			case r%2 == 0 && r+1 < s:
				assert.NoError(t, Send(c, msg, r+1, n))
				if i == 2 {
					_, err := Recv[float64](c, nil, r+1, n)
					assert.NoError(t, err)
				}
			case r%2 == 1:
				guard := make([]float64, n+10)
				for j := range guard {
					guard[j] = -1
				}
				err := recv(guard[:short])
				assert.ErrorIs(t, err, ErrTruncate, "receive %d of %d elements", i, n)
				assert.Equal(t, msg[:short], guard[:short], "truncated data, receive %d", i)
				overrun := 0
				for _, v := range guard[short:] {
					if v != -1 {
						overrun++
					}
				}
				assert.Zero(t, overrun, "elements written past the buffer, receive %d of %d elements", i, n)
			}
		}
	}
}
