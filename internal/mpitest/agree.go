// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"time"

	"github.com/tdmpi/tdmpi/mpi"
)

// agreeTag is the tag of agreement messages on a harness communicator.
const agreeTag = 1

// harness agrees on verdicts over its own communicator, so its messages
// never meet those of the code under test.
type harness struct {
	comm    *mpi.Comm
	seq     int64
	timeout time.Duration
}

// errTimeout is wrapped by the error of agree when ranks do not answer.
var errTimeout = errors.New("timed out")

// agree exchanges this rank's verdict (0 pass, else failure) on the step
// called name with every other rank and returns all verdicts, indexed by
// rank. Every rank must call agree for the same steps in the same order;
// it returns an error if they do not, or if some rank does not call within
// timeout.
//
// Rank 0 gathers [sequence, name hash, verdict] from each rank, checks that
// all ranks are at the same step, and sends back [status, verdicts...].
// Nonblocking calls polled against a deadline bound the wait.
func (h *harness) agree(name string, verdict int64, timeout time.Duration) ([]int64, error) {
	h.seq++
	rank, size := h.comm.Rank(), h.comm.Size()
	deadline := time.Now().Add(timeout)
	mine := []int64{h.seq, nameHash(name), verdict}
	reply := make([]int64, 1+size)

	if rank != 0 {
		sreq, err := mpi.Isend(h.comm, mine, 0, agreeTag)
		if err != nil {
			return nil, err
		}
		rreq, err := mpi.Irecv(h.comm, reply, 0, agreeTag)
		if err != nil {
			return nil, err
		}
		if err := wait(deadline, timeout, []*mpi.Request{rreq, sreq}); err != nil {
			return nil, fmt.Errorf("waiting for rank 0's verdict on %s: %w", name, err)
		}
		if reply[0] != 0 {
			return nil, fmt.Errorf("ranks are not at the same test: rank 0 found a mismatch at %s (step %d)", name, h.seq)
		}
		return reply[1:], nil
	}

	got := make([][]int64, size)
	reqs := make([]*mpi.Request, size)
	for r := 1; r < size; r++ {
		got[r] = make([]int64, 3)
		req, err := mpi.Irecv(h.comm, got[r], r, agreeTag)
		if err != nil {
			return nil, err
		}
		reqs[r] = req
	}
	if err := wait(deadline, timeout, reqs); err != nil {
		return nil, fmt.Errorf("waiting for the other ranks' verdicts on %s: %w", name, err)
	}
	got[0] = mine
	var mismatch error
	for r := range size {
		reply[1+r] = got[r][2]
		if got[r][0] != mine[0] || got[r][1] != mine[1] {
			mismatch = errors.Join(mismatch, fmt.Errorf("rank %d is at step %d, rank 0 at step %d (%s)", r, got[r][0], mine[0], name))
		}
	}
	if mismatch != nil {
		reply[0] = 1
	}
	sends := make([]*mpi.Request, size)
	for r := 1; r < size; r++ {
		req, err := mpi.Isend(h.comm, reply, r, agreeTag)
		if err != nil {
			return nil, err
		}
		sends[r] = req
	}
	if err := wait(deadline, timeout, sends); err != nil {
		return nil, fmt.Errorf("sending the verdicts on %s: %w", name, err)
	}
	if mismatch != nil {
		return nil, fmt.Errorf("ranks are not at the same test: %w", mismatch)
	}
	return reply[1:], nil
}

// wait polls reqs (nil entries are skipped) until all complete or the
// deadline passes. At the deadline it cancels the receives still pending
// and returns an error wrapping errTimeout.
func wait(deadline time.Time, timeout time.Duration, reqs []*mpi.Request) error {
	pause := 20 * time.Microsecond
	for spin := 0; ; spin++ {
		pending := 0
		for i, r := range reqs {
			if r == nil {
				continue
			}
			done, _, err := r.Test()
			if err != nil {
				return err
			}
			if done {
				reqs[i] = nil
			} else {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			// Cancel what can be cancelled, so that a late message does
			// not land in a buffer nobody reads; sends may stay pending.
			for _, r := range reqs {
				if r != nil && r.Cancel() == nil {
					cancelWait(r)
				}
			}
			return fmt.Errorf("%w after %v: %d requests still pending", errTimeout, time.Since(deadline.Add(-timeout)).Round(time.Millisecond), pending)
		}
		if spin < 200 {
			// Peers usually answer within microseconds: yield before sleeping.
			runtime.Gosched()
			continue
		}
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// cancelWait completes a cancelled request, giving up after a second (an
// MPI library may be unable to cancel a send).
func cancelWait(r *mpi.Request) {
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		if done, _, err := r.Test(); done || err != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func nameHash(s string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return int64(h.Sum64() >> 1)
}
