// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMprobeConcurrent has every rank send msgs messages to every other rank
// from several goroutines, while 8 goroutines per rank receive them with
// Mprobe(AnySource, AnyTag) and Mrecv. Every message must arrive exactly
// once, intact.
func TestMprobeConcurrent(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	const msgs, receivers = 200, 8
	r, s := c.Rank(), c.Size()
	payload := func(src, seq int) []int64 {
		p := make([]int64, 1+seq%17) // lengths vary, some zero-free
		for i := range p {
			p[i] = int64(src<<32 | seq<<8 | i)
		}
		return p
	}

	var remaining atomic.Int64
	remaining.Store(int64(msgs * (s - 1)))
	var mu sync.Mutex
	seen := make(map[[2]int]int)
	var wg sync.WaitGroup
	errs := make(chan error, receivers+s)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				m, st, err := Mprobe(c, AnySource, AnyTag)
				if err != nil {
					errs <- err
					return
				}
				buf := make([]int64, Count[int64](st))
				st2, err := Mrecv(m, buf)
				if err != nil {
					errs <- err
					return
				}
				_, err = Mrecv(m, buf)
				if !assert.ErrorIs(t, err, ErrRequest, "second Mrecv") {
					return
				}
				assert.Equal(t, st.Source, st2.Source)
				assert.Equal(t, st.Tag, st2.Tag)
				assert.Equal(t, payload(st.Source, st.Tag), buf)
				mu.Lock()
				seen[[2]int{st.Source, st.Tag}]++
				mu.Unlock()
			}
		}()
	}
	var swg sync.WaitGroup
	for dest := range s {
		if dest == r {
			continue
		}
		swg.Add(1)
		go func() {
			defer swg.Done()
			for seq := range msgs {
				if err := Send(c, payload(r, seq), dest, seq); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	swg.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Len(t, seen, msgs*(s-1))
	for k, n := range seen {
		assert.Equal(t, 1, n, "message %v", k)
	}
	m, ok, _, err := Improbe(c, AnySource, AnyTag)
	require.NoError(t, err)
	assert.False(t, ok, "no message left")
	assert.Nil(t, m)
	require.NoError(t, c.Barrier())
}

func TestImprobe(t *testing.T) {
	c := Self()
	m, ok, _, err := Improbe(c, 0, 5)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Nil(t, m)
	req, err := Isend(c, []complex64{1 + 2i, 3}, 0, 5)
	require.NoError(t, err)
	for deadline := time.Now().Add(30 * time.Second); !ok && err == nil && time.Now().Before(deadline); {
		m, ok, _, err = Improbe(c, 0, 5)
	}
	require.NoError(t, err)
	require.True(t, ok, "no message within 30 s")
	buf := make([]complex64, 2)
	st, err := Mrecv(m, buf)
	require.NoError(t, err)
	assert.Equal(t, []complex64{1 + 2i, 3}, buf)
	assert.Equal(t, 2, Count[complex64](st))
	_, err = req.Wait()
	require.NoError(t, err)

	_, err = Mrecv[int](nil, nil)
	assert.ErrorIs(t, err, ErrRequest)
}

func TestMprobeProcNull(t *testing.T) {
	m, st, err := Mprobe(World(), ProcNull, AnyTag)
	require.NoError(t, err)
	assert.Equal(t, ProcNull, st.Source)
	st, err = Mrecv[int](m, nil)
	require.NoError(t, err)
	assert.Equal(t, ProcNull, st.Source)
}

// TestImrecv receives matched messages with Imrecv: on Self a small one,
// after refusing a buffer too short for it; between ranks 0 and 1 one of
// 4 MiB (a rendezvous message), tested until it completes.
func TestImrecv(t *testing.T) {
	c := Self()
	req, err := Isend(c, []complex64{1 + 2i, 3, 4}, 0, 6)
	require.NoError(t, err)
	m, st, err := Mprobe(c, 0, 6)
	require.NoError(t, err)
	assert.Equal(t, 3, Count[complex64](st))
	_, err = Imrecv(m, make([]complex64, 2))
	require.ErrorIs(t, err, ErrTruncate, "a buffer shorter than the message")
	assert.ErrorContains(t, err, "message of 24 bytes, buffer of 16")
	buf := make([]complex64, 3)
	r, err := Imrecv(m, buf) // m was not consumed by the refusal
	require.NoError(t, err)
	st, err = r.Wait()
	require.NoError(t, err)
	assert.Equal(t, []complex64{1 + 2i, 3, 4}, buf)
	assert.Equal(t, 3, Count[complex64](st))
	_, err = req.Wait()
	require.NoError(t, err)
	_, err = Imrecv(m, buf)
	assert.ErrorIs(t, err, ErrRequest, "a consumed message")
	_, err = Imrecv[int](nil, nil)
	assert.ErrorIs(t, err, ErrRequest)

	if World().Size() < 2 {
		return
	}
	wc := testComm(t)
	const n = 1 << 19 // 4 MiB of float64
	switch wc.Rank() {
	case 0:
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(i)
		}
		require.NoError(t, Send(wc, out, 1, 7))
	case 1:
		m, st, err := Mprobe(wc, 0, 7)
		require.NoError(t, err)
		require.Equal(t, n, Count[float64](st))
		in := make([]float64, n)
		r, err := Imrecv(m, in)
		require.NoError(t, err)
		deadline := time.Now().Add(30 * time.Second)
		done := false
		for !done && err == nil && time.Now().Before(deadline) {
			done, st, err = r.Test()
		}
		require.NoError(t, err)
		require.True(t, done, "the 4 MiB receive did not complete within 30 s")
		assert.Equal(t, n, Count[float64](st))
		assert.Equal(t, 0, st.Source)
		for i, x := range in {
			if x != float64(i) {
				t.Fatalf("element %d is %v", i, x)
			}
		}
	}
	require.NoError(t, wc.Barrier())
}

// TestProbeIntoNoAlloc: MprobeInto and ImprobeInto fill the caller's
// Message, so a receive loop over them does not allocate (Mprobe and
// Improbe return a new Message each). The messages, to Self, are posted
// beforehand with Isend: a blocking Send to Self may wait for its receive
// (MPICH under srun does).
func TestProbeIntoNoAlloc(t *testing.T) {
	const runs = 100
	c := Self()
	out, in := []int64{1, 2, 3}, make([]int64, 3)
	var reqs []*Request
	for range runs + 1 { // AllocsPerRun runs f once more, first
		for _, tag := range []int{8, 9} {
			r, err := Isend(c, out, 0, tag)
			require.NoError(t, err)
			reqs = append(reqs, r)
		}
	}
	var m Message
	allocs := testing.AllocsPerRun(runs, func() {
		st, err := MprobeInto(&m, c, 0, 8)
		require.NoError(t, err)
		require.Equal(t, 3, Count[int64](st))
		_, err = Mrecv(&m, in)
		require.NoError(t, err)
		ok := false
		for !ok && err == nil {
			ok, _, err = ImprobeInto(&m, c, 0, 9)
		}
		require.NoError(t, err)
		_, err = Mrecv(&m, in)
		require.NoError(t, err)
	})
	require.NoError(t, WaitAll(reqs...))
	assert.Equal(t, []int64{1, 2, 3}, in)
	assert.Zero(t, allocs, "allocations per MprobeInto+Mrecv+ImprobeInto+Mrecv")
	ok, _, err := ImprobeInto(&m, c, 0, 9)
	require.NoError(t, err)
	assert.False(t, ok, "no message left")
	_, err = Mrecv(&m, in)
	assert.ErrorIs(t, err, ErrRequest, "m was received, and ImprobeInto without a match left it so")
}

// recvExact receives a message of its buffer's size in one call and leaves
// any other matched for Mrecv.
func TestRecvExact(t *testing.T) {
	c := Self()
	var reqs []*Request
	for _, msg := range [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8, 9, 10}, {}} {
		r, err := Isend(c, msg, 0, 9)
		require.NoError(t, err)
		reqs = append(reqs, r)
	}
	var m Message
	buf := make([]byte, 4)
	st, got, err := recvExact(&m, c, buf, 0, 9)
	require.NoError(t, err)
	require.True(t, got)
	assert.Equal(t, []byte{1, 2, 3, 4}, buf)
	assert.Equal(t, int64(4), st.Bytes())

	st, got, err = recvExact(&m, c, buf, 0, 9)
	require.NoError(t, err)
	require.False(t, got, "6 bytes for a 4-byte buffer")
	assert.Equal(t, int64(6), st.Bytes())
	assert.Equal(t, []byte{1, 2, 3, 4}, buf, "nothing received")
	long := make([]byte, 6)
	_, err = Mrecv(&m, long)
	require.NoError(t, err, "the message stayed matched")
	assert.Equal(t, []byte{5, 6, 7, 8, 9, 10}, long)

	st, got, err = recvExact(&m, c, nil, 0, 9)
	require.NoError(t, err)
	assert.True(t, got, "an empty message into an empty buffer")
	assert.Zero(t, st.Bytes())
	for _, r := range reqs {
		_, err := r.Wait()
		require.NoError(t, err)
	}
	_, _, err = recvExact(&m, c, buf, 5, 9)
	assert.ErrorIs(t, err, ErrRank)
}

// TestProbeUntil: mprobeUntil and recvExactUntil give up once their done
// channel is closed, within a few milliseconds, matching nothing and
// leaving *m as it was, whether done closes before the call or during its
// wait; a message that comes before is matched (and received) as by
// MprobeInto and recvExact, and the one left for the probe is still there
// for the next.
func TestProbeUntil(t *testing.T) {
	c := Self()
	closed := make(chan struct{})
	close(closed)
	var m Message
	buf := make([]byte, 4)
	for name, wait := range map[string]func(done <-chan struct{}) (bool, error){
		"mprobeUntil": func(done <-chan struct{}) (bool, error) {
			_, ended, err := mprobeUntil(&m, c, 0, 21, done)
			return ended, err
		},
		"recvExactUntil": func(done <-chan struct{}) (bool, error) {
			_, got, ended, err := recvExactUntil(&m, c, buf, 0, 21, done)
			assert.False(t, got, "recvExactUntil received")
			return ended, err
		},
	} {
		ended, err := wait(closed)
		require.NoError(t, err, name)
		assert.True(t, ended, "%s: done closed before the call", name)
		assert.Equal(t, Message{}, m, "%s: matched something", name)

		done := make(chan struct{})
		time.AfterFunc(20*time.Millisecond, func() { close(done) })
		start := time.Now()
		ended, err = wait(done)
		took := time.Since(start)
		require.NoError(t, err, name)
		assert.True(t, ended, "%s: done closed during the wait", name)
		assert.Less(t, took, time.Second, "%s: gave up %v after done closed", name, took-20*time.Millisecond)
		assert.Equal(t, Message{}, m, "%s: matched something", name)
	}

	r, err := Isend(c, []byte{1, 2, 3, 4}, 0, 21)
	require.NoError(t, err)
	st, got, ended, err := recvExactUntil(&m, c, buf, 0, 21, make(chan struct{}))
	require.NoError(t, err)
	assert.True(t, got)
	assert.False(t, ended)
	assert.Equal(t, int64(4), st.Bytes())
	assert.Equal(t, []byte{1, 2, 3, 4}, buf)
	_, err = r.Wait()
	require.NoError(t, err)

	r, err = Isend(c, []byte{5, 6}, 0, 21)
	require.NoError(t, err)
	st, ended, err = mprobeUntil(&m, c, 0, 21, closed) // a message there is matched all the same
	require.NoError(t, err)
	assert.False(t, ended)
	assert.Equal(t, int64(2), st.Bytes())
	_, err = Mrecv(&m, buf[:2])
	require.NoError(t, err)
	assert.Equal(t, []byte{5, 6}, buf[:2])
	_, err = r.Wait()
	require.NoError(t, err)
}

// TestMrecvUntil: mrecvUntil receives a matched message as Mrecv does,
// refuses a buffer too short or a message already received, and
// allocates nothing; a receive given up mid-payload is
// TestReceiveStallMidPayload's (package test), which needs a stalled
// sender.
func TestMrecvUntil(t *testing.T) {
	c := Self()
	const runs = 20
	out := []byte{1, 2, 3, 4, 5}
	var reqs []*Request
	for range runs + 3 { // AllocsPerRun runs f once more, first
		r, err := Isend(c, out, 0, 23)
		require.NoError(t, err)
		reqs = append(reqs, r)
	}
	var m Message
	_, err := MprobeInto(&m, c, 0, 23)
	require.NoError(t, err)
	_, _, err = mrecvUntil(&m, make([]byte, 4), nil)
	assert.ErrorIs(t, err, ErrTruncate)
	buf := make([]byte, 8)
	st, ended, err := mrecvUntil(&m, buf, make(chan struct{}))
	require.NoError(t, err, "the message stayed matched after the refusal")
	assert.False(t, ended)
	assert.Equal(t, int64(5), st.Bytes())
	assert.Equal(t, out, buf[:5])
	_, _, err = mrecvUntil(&m, buf, nil)
	assert.ErrorIs(t, err, ErrRequest, "a message received already")

	_, err = MprobeInto(&m, c, 0, 23)
	require.NoError(t, err)
	closed := make(chan struct{})
	close(closed)
	st, ended, err = mrecvUntil(&m, buf, closed) // its bytes are there: it completes all the same
	require.NoError(t, err)
	assert.False(t, ended)
	assert.Equal(t, int64(5), st.Bytes())

	allocs := testing.AllocsPerRun(runs, func() {
		_, err := MprobeInto(&m, c, 0, 23)
		require.NoError(t, err)
		_, ended, err := mrecvUntil(&m, buf, nil)
		require.NoError(t, err)
		require.False(t, ended)
	})
	require.NoError(t, WaitAll(reqs...))
	assert.Zero(t, allocs, "allocations per MprobeInto+mrecvUntil")
	assert.Zero(t, inFlightOps())
}
