// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
// long long tdmpi_spin_ns, tdmpi_slice_ns;
// #cgo noescape tdmpi_pause
// #cgo nocallback tdmpi_pause
import "C"

import (
	"sync"
	"time"
)

var spinMu sync.Mutex // serialises SetSpinWait

// pollSlice is how long one call into C of a blocking receive, probe or
// Request.Wait polls before it returns to Go, which lets its scheduler run
// (yield) and calls again. A thread in C holds its processor
// (P) all the while: in a rank bound to one core, as mpirun binds two
// ranks by default (GOMAXPROCS is then 1), the collector's workers and
// other goroutines could otherwise run only once the runtime's monitor
// handed the processor to another thread, which must then get the one
// core from the thread still polling. In a ping-pong of small
// InitRemotes between two ranks bound to a core each, returning took the
// median one way from 2.6 to 1.9 us (six alternating runs; 4.2 to 2.9 us
// in six others, on a busier machine).
const pollSlice = 10 * time.Microsecond

func init() {
	SetSpinWait(DefaultSpinWait)
	C.tdmpi_slice_ns = C.longlong(pollSlice)
}

// waiting returns the result of call, a blocking wait of shim.h, called
// again with the same status (which holds where the wait was) for as long
// as it returns TDMPI_AGAIN, with yield between (see pollSlice).
func waiting(call func() C.int) C.int {
	rc, _ := waitingUntil(nil, call)
	return rc
}

// waitingUntil is waiting that gives up once done is closed (nil: never),
// checked each time call returns TDMPI_AGAIN: ended is then true. The
// caller must be able to stop there: a probe has matched nothing; an
// operation under way is the caller's to hand over (see startUntil).
func waitingUntil(done <-chan struct{}, call func() C.int) (rc C.int, ended bool) {
	rc = call()
	for rc == C.TDMPI_AGAIN {
		select {
		case <-done:
			return rc, true
		default:
		}
		yield()
		rc = call()
	}
	return rc, false
}

// SetSpinWait sets how long the blocking receives and probes of this
// package (Recv, Probe, Mprobe, Sendrecv), and the waits for
// requests of at most 64 KiB (Request.Wait, Request.Await, WaitAll), poll MPI
// without pause before they yield their core to other threads after each
// poll (sched_yield), and returns the previous value. 0 or less never pauses:
// every wait polls without pause, as MPI_Mprobe does. The default,
// DefaultSpinWait, leaves a short wait as fast as a busy poll and lets a
// long one share its core: MPI ranks polling on every core of a node
// otherwise keep the Go runtime's own threads (the garbage collector's
// workers, other goroutines) off them for a scheduler time slice at a
// time. A wait that has lasted 1 ms, or d if longer, sleeps between polls
// instead of yielding, for 1/16 of the time waited (5 us to 1 ms; see
// "Waiting" in the package documentation). Whatever the value, a wait
// lets the Go scheduler run every 10 us of polling (runtime.Gosched), and
// reads the value again then.
func SetSpinWait(d time.Duration) time.Duration {
	spinMu.Lock()
	defer spinMu.Unlock()
	old := time.Duration(C.tdmpi_spin_ns)
	C.tdmpi_spin_ns = C.longlong(max(d, 0))
	return old
}

// A Pacer paces a loop that polls MPI itself, one nonblocking probe or
// test at a time, between checks of its own (a context, say), as this
// package's blocking waits pace theirs (see "Waiting" in the package
// documentation). After each poll that found nothing the loop calls
// Pause, which returns at once for the first 20 us of the wait (see
// SetSpinWait), then yields the core (sched_yield) until the wait has
// lasted 1 ms, then sleeps for 1/16 of the time waited so far, 5 us to
// 1 ms; every 64 calls, and after each sleep, it lets the Go scheduler
// run (runtime.Gosched, unless the goroutine is locked to its thread). A
// timer instead would sleep at least a millisecond on Linux, however
// short the sleep asked for: a receive whose sender came 50 us late took
// 1.6 ms. The zero Pacer is a wait that has not started; a Pacer serves
// one wait of one goroutine.
type Pacer struct {
	st C.tdmpi_status
	n  C.uint
}

// Pause pauses p's wait after a poll that found nothing (see Pacer).
func (p *Pacer) Pause() {
	p.n++
	var begin C.longlong
	if C.tdmpi_pause(&p.st, p.n, &begin) != 0 || p.n%64 == 0 {
		yield()
	}
}
