// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Calls in progress. Finalize must not run while another goroutine is
// inside MPI (MPI_Finalize then frees memory that call uses), so every
// call into MPI that may block or take long counts itself in its
// function's callCount (enter, leave), and Finalize closes the gate
// (closeCalls) only when every count is 0; the counts name the calls for
// its error. A call costs two atomic additions and one load: the gate is
// on the path of every message.
//
// enter adds to its count, then reads closing; closeCalls sets closing,
// then reads the counts. The atomics are sequentially consistent, so of a
// call and a Finalize that race, at least one sees the other: the call
// takes its count back and waits for the gate's lock, or Finalize refuses.
var calls struct {
	mu      sync.Mutex  // held while the gate is closed
	closing atomic.Bool // the gate is closed, or closing
	all     []*callCount
}

// callCount counts the calls of one MPI function in progress.
type callCount struct {
	op string
	n  atomic.Int64
	// quick is set for the calls that return without waiting for another
	// process (MPI_Improbe, MPI_Iprobe, MPI_Test): closeCalls waits for
	// them to end instead of refusing. The leave-notice poller of package
	// group makes such a call every 100 ms on a goroutine of its own.
	quick bool
}

// newCallCount returns the count of op's calls. Package initialisation
// makes them all (below): calls.all is not written after.
func newCallCount(op string) *callCount {
	c := &callCount{op: op}
	calls.all = append(calls.all, c)
	return c
}

// newQuickCount is newCallCount for a call that does not wait (see quick).
func newQuickCount(op string) *callCount {
	c := newCallCount(op)
	c.quick = true
	return c
}

// quickWait bounds how long closeCalls waits for quick calls to end.
const quickWait = 100 * time.Millisecond

var (
	callAllgather       = newCallCount("MPI_Allgather")
	callAllgatherv      = newCallCount("MPI_Allgatherv")
	callAllreduce       = newCallCount("MPI_Allreduce")
	callAlltoall        = newCallCount("MPI_Alltoall")
	callBarrier         = newCallCount("MPI_Barrier")
	callBcast           = newCallCount("MPI_Bcast")
	callCommCreateGroup = newCallCount("MPI_Comm_create_group")
	callCommDup         = newCallCount("MPI_Comm_dup")
	callCommFree        = newCallCount("MPI_Comm_free")
	callCommSplit       = newCallCount("MPI_Comm_split")
	callCommSplitType   = newCallCount("MPI_Comm_split_type")
	callGather          = newCallCount("MPI_Gather")
	callGatherv         = newCallCount("MPI_Gatherv")
	callImprobe         = newQuickCount("MPI_Improbe")
	callIprobe          = newQuickCount("MPI_Iprobe")
	callMprobe          = newCallCount("MPI_Mprobe")
	callMrecv           = newCallCount("MPI_Mrecv")
	callProbe           = newCallCount("MPI_Probe")
	callRecv            = newCallCount("MPI_Recv")
	callReduce          = newCallCount("MPI_Reduce")
	callScan            = newCallCount("MPI_Scan")
	callScatter         = newCallCount("MPI_Scatter")
	callScatterv        = newCallCount("MPI_Scatterv")
	callSend            = newCallCount("MPI_Send")
	callSendrecv        = newCallCount("MPI_Sendrecv")
	callTest            = newQuickCount("MPI_Test")
	callWait            = newCallCount("MPI_Wait")
	callWaitall         = newCallCount("MPI_Waitall")
	callWaitany         = newCallCount("MPI_Waitany")
)

// enter records that a call of c's function starts; the caller defers
// leave. While the gate is closed (Finalize runs, or Busy looks), it waits
// for it to open.
func (c *callCount) enter() *callCount {
	c.n.Add(1)
	if calls.closing.Load() {
		c.n.Add(-1)
		calls.mu.Lock()
		c.n.Add(1)
		calls.mu.Unlock()
	}
	return c
}

// leave records that the call has returned.
func (c *callCount) leave() { c.n.Add(-1) }

// closeCalls closes the gate and reports true if no call is in
// progress; the caller then opens it with openCalls. Otherwise it leaves
// the gate open and reports false, as it does at once when the gate is
// closed already (a Finalize runs, or another check): Busy never waits
// behind an MPI_Finalize.
func closeCalls() bool {
	if !calls.mu.TryLock() {
		return false
	}
	calls.closing.Store(true)
	for start := time.Now(); ; runtime.Gosched() {
		quick := false
		for _, c := range calls.all {
			if c.n.Load() == 0 {
				continue
			}
			if !c.quick || time.Since(start) > quickWait {
				calls.closing.Store(false)
				calls.mu.Unlock()
				return false
			}
			quick = true // it ends by itself; new calls wait at the gate
		}
		if !quick {
			return true
		}
	}
}

// openCalls opens the gate closeCalls closed.
func openCalls() {
	calls.closing.Store(false)
	calls.mu.Unlock()
}

// inProgress describes the calls in progress, such as "MPI_Probe ×2, MPI_Recv".
func inProgress() string {
	var parts []string
	for _, c := range calls.all {
		switch n := c.n.Load(); {
		case n == 1:
			parts = append(parts, c.op)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%s ×%d", c.op, n))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
