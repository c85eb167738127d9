// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSendCopy: each even rank sends messages of several sizes to the
// next odd rank with sendCopy, overwriting its buffer as soon as each call
// returns, and more than copySendSlots of them before the receiver, asleep
// outside MPI, takes any. Every message sendCopy started arrives whole and
// in order; one it declined (too long, or no slot free) never does; the
// sends in flight never pass copySendSlots.
func TestSendCopy(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	const tag, endTag = 5, 6
	sizes := []int{0, 1, 256, 257, 1000, copySendMax, copySendMax + 1}
	const rounds = 12 // 7 sizes: 84 messages, past copySendSlots
	content := func(i, n int) []byte { return bytes.Repeat([]byte{byte(i*31 + 7)}, n) }
	switch {
	case r%2 == 0 && r+1 < s:
		buf := make([]byte, copySendMax+1)
		var started []int // the messages sendCopy started, by number
		most := 0
		for i := range rounds * len(sizes) {
			n := sizes[i%len(sizes)]
			copy(buf, content(i, n))
			sent, err := sendCopy(c, buf[:n], r+1, tag)
			require.NoError(t, err, "message %d", i)
			// Overwritten at once: what arrives is the copy.
			copy(buf, content(i+1, n))
			if n > copySendMax {
				assert.False(t, sent, "message %d of %d bytes: sent", i, n)
			}
			if sent {
				started = append(started, i)
			}
			copySends.mu.Lock()
			most = max(most, len(copySends.out))
			copySends.mu.Unlock()
		}
		assert.LessOrEqual(t, most, copySendSlots, "sends of copies in flight")
		t.Logf("%d of %d messages sent from copies, at most %d in flight", len(started), rounds*len(sizes), most)
		ends := []int64{int64(len(started))}
		require.NoError(t, Send(c, ends, r+1, endTag))
		for _, i := range started {
			require.NoError(t, Send(c, []int64{int64(i)}, r+1, endTag))
		}
		n, err := waitCopies(time.Minute)
		require.NoError(t, err)
		assert.Zero(t, n, "in flight once the receiver took every message")
	case r%2 == 1:
		time.Sleep(100 * time.Millisecond) // outside MPI: the sends pile up
		var count [1]int64
		_, err := Recv(c, count[:], r-1, endTag)
		require.NoError(t, err)
		for k := range count[0] {
			var which [1]int64
			_, err := Recv(c, which[:], r-1, endTag)
			require.NoError(t, err)
			i := int(which[0])
			n := sizes[i%len(sizes)]
			got := make([]byte, copySendMax+8)
			st, err := Recv(c, got, r-1, tag)
			require.NoError(t, err, "message %d (%d of those sent)", i, k)
			assert.Equal(t, n, Count[byte](st), "message %d: bytes", i)
			assert.True(t, bytes.Equal(content(i, n), got[:Count[byte](st)]), "message %d: content", i)
		}
		ok, _, err := Iprobe(c, r-1, tag)
		require.NoError(t, err)
		assert.False(t, ok, "a message sendCopy declined arrived")
	}
}

// TestSendCopyArgs: sendCopy checks its arguments as Send does, and sends
// nothing then.
func TestSendCopyArgs(t *testing.T) {
	c := testComm(t)
	for _, tc := range []struct {
		name      string
		dest, tag int
	}{
		{"negative destination", -5, 0},
		{"destination past the size", c.Size(), 0},
		{"negative tag", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, err := sendCopy(c, []byte("x"), tc.dest, tc.tag)
			assert.Error(t, err)
			assert.False(t, sent)
		})
	}
	var freed Comm
	sent, err := sendCopy(&freed, []byte("x"), 0, 0)
	assert.Error(t, err, "a communicator never made")
	assert.False(t, sent)
}

// TestSendCopyDrain: waitCopies waits for a send of a copy that its
// receiver takes late, and, when the receiver takes it after the wait,
// returns with it still in flight (over shared memory; a transport that
// completes sends without the receiver, TCP, has none left); once taken,
// none is. Busy does not count them: Finalize waits for them.
func TestSendCopyDrain(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	msg := bytes.Repeat([]byte{9}, 1000)
	const wait = time.Second // long beside the early receiver's 100 ms, for a loaded machine
	for _, late := range []time.Duration{wait / 10, wait + wait/2} {
		t.Run(fmt.Sprintf("taken after %v", late), func(t *testing.T) {
			switch {
			case r%2 == 0 && r+1 < s:
				sent, err := sendCopy(c, msg, r+1, 3)
				require.NoError(t, err)
				require.True(t, sent)
				assert.NoError(t, Busy(), "a send of a copy in flight")
				n, err := waitCopies(wait)
				require.NoError(t, err)
				if late < wait {
					assert.Zero(t, n, "in flight after the receiver took it")
				}
				t.Logf("in flight after %v: %d", wait, n)
				require.NoError(t, Send(c, []byte{1}, r+1, 4)) // go on
				_, err = Recv(c, []byte{0}, r+1, 4)            // it took the message
				require.NoError(t, err)
				n, err = waitCopies(0)
				assert.NoError(t, err)
				assert.Zero(t, n, "in flight once the receiver took it")
			case r%2 == 1:
				time.Sleep(late)
				got := make([]byte, len(msg))
				_, err := Recv(c, got, r-1, 3)
				require.NoError(t, err)
				assert.Equal(t, msg, got)
				_, err = Recv(c, []byte{0}, r-1, 4)
				require.NoError(t, err)
				require.NoError(t, Send(c, []byte{1}, r-1, 4))
			}
		})
	}
}

// TestSendCopyNoAlloc: a sendCopy, and an ibcastWait, allocate nothing
// (each had allocated what it handed to C, before its C functions were
// declared noescape). The sends, to Self, are received afterwards.
func TestSendCopyNoAlloc(t *testing.T) {
	const runs = copySendSlots / 2 // every send is started
	c := Self()
	buf, got := bytes.Repeat([]byte{4}, 1000), make([]byte, 1000)
	sent := 0
	allocs := testing.AllocsPerRun(runs, func() {
		ok, err := sendCopy(c, buf, 0, 12)
		require.NoError(t, err)
		if ok {
			sent++
		}
	})
	assert.Equal(t, runs+1, sent) // AllocsPerRun runs f once more, first
	for range sent {
		_, err := Recv(c, got, 0, 12)
		require.NoError(t, err)
	}
	assert.Equal(t, buf, got)
	assert.Zero(t, allocs, "allocations per sendCopy")
	n, err := waitCopies(0)
	require.NoError(t, err)
	assert.Zero(t, n)

	allocs = testing.AllocsPerRun(runs, func() { require.NoError(t, ibcastWait(c, buf, 0)) })
	assert.Zero(t, allocs, "allocations per ibcastWait")
}

// TestSendUntil: a send that completes before done closes returns with
// ended false and leaves nothing in flight; one that its receiver, asleep,
// does not take before done closes (a message past every eager limit) is
// abandoned, in flight until the receiver takes it, whole; and one to
// Self allocates nothing.
func TestSendUntil(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	small, big := bytes.Repeat([]byte{3}, 100), bytes.Repeat([]byte{5}, 4<<20)
	switch {
	case r%2 == 0 && r+1 < s:
		ended, err := sendUntil(c, small, r+1, 7, make(chan struct{}))
		require.NoError(t, err)
		assert.False(t, ended)
		done := make(chan struct{})
		time.AfterFunc(50*time.Millisecond, func() { close(done) })
		ended, err = sendUntil(c, big, r+1, 8, done)
		require.NoError(t, err)
		assert.True(t, ended, "a 4 MiB send its receiver took only after done closed")
		if ended {
			assert.Equal(t, 1, inFlightOps(), "the abandoned send")
		}
		_, err = Recv(c, []byte{0}, r+1, 9) // the receiver took both
		require.NoError(t, err)
		for limit := time.Now().Add(10 * time.Second); inFlightOps() > 0 && time.Now().Before(limit); {
			time.Sleep(time.Millisecond)
		}
		assert.Zero(t, inFlightOps(), "the abandoned send completed once received")
	case r%2 == 1:
		got := make([]byte, len(small))
		_, err := Recv(c, got, r-1, 7)
		require.NoError(t, err)
		assert.Equal(t, small, got)
		time.Sleep(300 * time.Millisecond) // outside MPI
		got = make([]byte, len(big))
		_, err = Recv(c, got, r-1, 8)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(big, got), "the abandoned send arrived whole")
		require.NoError(t, Send(c, []byte{1}, r-1, 9))
	}

	// The receives to Self are posted first: a send to Self may complete
	// only once received (MPICH's does).
	self := Self()
	const runs = 20
	bufs := make([][]byte, runs+1) // AllocsPerRun runs f once more, first
	var reqs []*Request
	for i := range bufs {
		bufs[i] = make([]byte, len(small))
		q, err := Irecv(self, bufs[i], 0, 10)
		require.NoError(t, err)
		reqs = append(reqs, q)
	}
	allocs := testing.AllocsPerRun(runs, func() {
		ended, err := sendUntil(self, small, 0, 10, nil)
		require.NoError(t, err)
		require.False(t, ended)
	})
	require.NoError(t, WaitAll(reqs...))
	for _, b := range bufs {
		assert.Equal(t, small, b)
	}
	assert.Zero(t, allocs, "allocations per sendUntil")
}
