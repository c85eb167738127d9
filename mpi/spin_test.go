// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpinWait: the blocking receives and probes take messages that come
// at once and messages that come after they have waited past the spin
// period (polling, yielding, then sleeping, in slices that return to Go
// and resume), with spinning off, short and the default: each gets its
// message whole, with its status. SetSpinWait returns the period it
// replaces, a negative one as 0. It checks what the waits return, not
// how often they returned to the scheduler: on a loaded machine, that is
// the machine's choice.
func TestSpinWait(t *testing.T) {
	c := spinPeers(t)
	if c == nil {
		return
	}
	prev := SetSpinWait(DefaultSpinWait)
	assert.Equal(t, DefaultSpinWait, prev)
	for _, spin := range []time.Duration{0, -time.Second, time.Microsecond, DefaultSpinWait} {
		assert.Equal(t, prev, SetSpinWait(spin))
		prev = max(spin, 0)
		for _, late := range []time.Duration{0, 30 * time.Millisecond} {
			for i, op := range []string{"Recv", "Probe", "Mprobe", "recvExact", "Sendrecv"} {
				name := fmt.Sprintf("spin %v, sent after %v, %s", spin, late, op)
				want := []int64{int64(i), int64(spin), int64(late)}
				if c.Rank() == 0 {
					time.Sleep(late)
					if op == "Sendrecv" {
						back := make([]int64, 3)
						_, err := Sendrecv(c, want, 1, 40+i, back, 1, 50+i)
						require.NoError(t, err, name)
						assert.Equal(t, []int64{-1, -2, -3}, back, name)
						continue
					}
					require.NoError(t, Send(c, want, 1, 40+i), name)
					continue
				}
				got := make([]int64, 3)
				var st Status
				var err error
				switch op {
				case "Recv":
					st, err = Recv(c, got, 0, 40+i)
				case "Probe":
					st, err = Probe(c, 0, 40+i)
					require.NoError(t, err, name)
					assert.Equal(t, int64(24), st.Bytes(), name)
					st, err = Recv(c, got, 0, 40+i)
				case "Mprobe":
					var m *Message
					m, _, err = Mprobe(c, 0, 40+i)
					require.NoError(t, err, name)
					st, err = Mrecv(m, got)
				case "recvExact":
					buf := make([]byte, 24)
					var m Message
					var ok bool
					st, ok, err = recvExact(&m, c, buf, 0, 40+i)
					require.NoError(t, err, name)
					require.True(t, ok, name)
					for j := range got {
						for k := 7; k >= 0; k-- {
							got[j] = got[j]<<8 | int64(buf[8*j+k])
						}
					}
				case "Sendrecv":
					st, err = Sendrecv(c, []int64{-1, -2, -3}, 0, 50+i, got, 0, 40+i)
				}
				require.NoError(t, err, name)
				assert.Equal(t, want, got, name)
				assert.Equal(t, 0, st.Source, name)
				assert.Equal(t, 40+i, st.Tag, name)
				assert.Equal(t, int64(24), st.Bytes(), name)
			}
		}
	}
}

// TestWaitLate: Request.Wait on a receive and on a broadcast whose sender
// comes 30 ms late, past the spin period, completes with the data.
func TestWaitLate(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	const late = 30 * time.Millisecond
	want := []int64{7, 8, 9}
	if c.Rank() <= 1 {
		if c.Rank() == 0 {
			time.Sleep(late)
			require.NoError(t, Send(c, want, 1, 60))
		} else {
			got := make([]int64, 3)
			r, err := Irecv(c, got, 0, 60)
			require.NoError(t, err)
			st, err := r.Wait()
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, int64(24), st.Bytes())
		}
	}
	buf := make([]int64, 3)
	if c.Rank() == 0 {
		copy(buf, want)
		time.Sleep(late)
	}
	r, err := Ibcast(c, buf, 0)
	require.NoError(t, err)
	_, err = r.Wait()
	require.NoError(t, err)
	assert.Equal(t, want, buf)
}

// TestWaitLockedThread: yield does not yield in a goroutine locked to its
// thread (runtime.Gosched would cost a thread switch there), and such a
// goroutine's Recv, whose wait calls yield, still gets its message.
func TestWaitLockedThread(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	if c.Rank() > 1 {
		return
	}
	assert.False(t, lockedOSThread())
	want := []int64{4, 5, 6}
	if c.Rank() == 0 {
		time.Sleep(30 * time.Millisecond)
		require.NoError(t, Send(c, want, 1, 70))
		return
	}
	assert.True(t, yield(), "an unlocked goroutine yields")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		assert.True(t, lockedOSThread())
		assert.False(t, yield(), "a locked goroutine does not")
		got := make([]int64, 3)
		_, err := Recv(c, got, 0, 70)
		assert.NoError(t, err)
		assert.Equal(t, want, got)
	}()
	<-done
}

// TestWaitNaps: a blocking receive that waits long sleeps between its
// polls instead of yielding its core in a loop (TDMPI_NAP in shim.h):
// while rank 1 waits 300 ms for rank 0, it uses a small part of a core.
// A wait that only yielded would use all of a core it has to itself, and
// about half of one where four ranks share two cores. Request.Wait and
// Request.Await of a small receive pause as Recv does; those of a receive
// over 64 KiB (pauseMaxBytes) test without pause all along, and use a
// large part of a core (a quarter at least, where four ranks share two).
//
// This test checks what each wait returns; the CPU time is logged, not
// asserted, since a loaded machine makes any bound flaky.
func TestWaitNaps(t *testing.T) {
	c := spinPeers(t)
	if c == nil {
		return
	}
	const late = 300 * time.Millisecond
	await := func(r *Request, err error) error {
		for err == nil {
			var done bool
			if done, _, err = r.Await(); done {
				break
			}
		}
		return err
	}
	wait := func(r *Request, err error) error {
		if err == nil {
			_, err = r.Wait()
		}
		return err
	}
	for i, tc := range []struct {
		op    string
		n     int // int64 values
		pause bool
		recv  func(got []int64, tag int) error
	}{
		{"Recv", 3, true, func(got []int64, tag int) error { _, err := Recv(c, got, 0, tag); return err }},
		{"Sendrecv", 3, true, func(got []int64, tag int) error {
			_, err := Sendrecv(c, []int64{3, 4, 5}, 0, tag+10, got, 0, tag)
			return err
		}},
		{"Irecv Wait", 3, true, func(got []int64, tag int) error { return wait(Irecv(c, got, 0, tag)) }},
		{"Irecv Await", 3, true, func(got []int64, tag int) error { return await(Irecv(c, got, 0, tag)) }},
		{"Irecv Wait 1 MiB", 1 << 17, false, func(got []int64, tag int) error { return wait(Irecv(c, got, 0, tag)) }},
		{"Irecv Await 1 MiB", 1 << 17, false, func(got []int64, tag int) error { return await(Irecv(c, got, 0, tag)) }},
	} {
		tag := 80 + i
		want := make([]int64, tc.n)
		for k := range want {
			want[k] = int64(i + k)
		}
		if c.Rank() == 0 {
			time.Sleep(late)
			if tc.op == "Sendrecv" {
				_, err := Sendrecv(c, want, 1, tag, make([]int64, 3), 1, tag+10)
				require.NoError(t, err, tc.op)
				continue
			}
			require.NoError(t, Send(c, want, 1, tag), tc.op)
			continue
		}
		got := make([]int64, tc.n)
		cpu0, start := cpuTime(t), time.Now()
		err := tc.recv(got, tag)
		cpu, waited := cpuTime(t)-cpu0, time.Since(start)
		require.NoError(t, err, tc.op)
		assert.Equal(t, want, got, tc.op)
		// How much CPU the wait used is a property of the machine's load as
		// much as of the wait: logged for a person, not asserted.
		t.Logf("%s: CPU time %v over a wait of %v", tc.op, cpu, waited)
	}
}

// TestSendrecvLatePeer: a Sendrecv whose send is past the eager limit
// (1 MiB), with the peer 100 ms late, moves the data whole both ways.
// (That the call stays in C until MPI is done with the send buffer, as
// Sendrecv's documentation says, is tdmpi_sendrecv's structure in
// shim.h: it returns TDMPI_AGAIN only once the send has completed.)
func TestSendrecvLatePeer(t *testing.T) {
	c := spinPeers(t)
	if c == nil {
		return
	}
	const n = 1 << 17 // 1 MiB of int64
	me, peer := c.Rank(), 1-c.Rank()
	send := make([]int64, n)
	for i := range send {
		send[i] = int64(i*2 + me)
	}
	got := make([]int64, n)
	if me == 1 {
		time.Sleep(100 * time.Millisecond)
	}
	_, err := Sendrecv(c, send, peer, 100, got, peer, 100)
	require.NoError(t, err)
	for i, x := range got {
		if x != int64(i*2+peer) {
			t.Fatalf("element %d: got %d, want %d", i, x, i*2+peer)
		}
	}
}

// spinPeers returns the test communicator on ranks 0 and 1, nil on the
// others, with the spin period at DefaultSpinWait until the test ends.
func spinPeers(t *testing.T) *Comm {
	t.Helper()
	needRanks(t, 2)
	c := testComm(t)
	if c.Rank() > 1 {
		return nil
	}
	old := SetSpinWait(DefaultSpinWait)
	t.Cleanup(func() { SetSpinWait(old) })
	return c
}

// cpuTime returns the CPU time, user and system, the process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
