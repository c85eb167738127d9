// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// inflight is a nonblocking operation MPI has not completed: its MPI
// handles (several for a reduction in pieces) and the pinner that keeps its
// buffers in place. The registry refers to it until the operation
// completes, whether or not anyone still holds its Request: the pinner is
// never unreachable while it pins (Go's runtime panics at the next
// collection if it is), and MPI never writes into memory Go has freed.
type inflight struct {
	hs    []C.MPI_Request
	pin   runtime.Pinner
	op    string
	k     kind
	size  int
	coll  bool // a collective: no message status
	pause bool // small enough for its wait to pause (see pauseMaxBytes)
	lost  bool // its Request was collected before completion
	// after holds the functions of afterInFlight called while f was in
	// flight (the registry lock guards it).
	after []*afterOps
}

// afterOps is a function afterInFlight runs once the n operations it
// still waits for have completed.
type afterOps struct {
	n int
	f func()
}

var registry struct {
	mu   sync.Mutex
	live map[*inflight]struct{}
	lost atomic.Int64 // how many of live are lost
}

func register(f *inflight) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.live == nil {
		registry.live = make(map[*inflight]struct{})
	}
	registry.live[f] = struct{}{}
}

// release unregisters f, completed, unpins its buffers and runs the
// functions of afterInFlight that waited for it last.
func (f *inflight) release() {
	registry.mu.Lock()
	after := f.unregister()
	registry.mu.Unlock()
	f.pin.Unpin()
	runAll(after)
}

// unregister removes f, completed, from the registry, whose lock the
// caller holds, and returns the functions of afterInFlight that waited
// for it last, for the caller to run once it has released the lock.
func (f *inflight) unregister() (after []func()) {
	delete(registry.live, f)
	for _, a := range f.after {
		if a.n--; a.n == 0 {
			after = append(after, a.f)
		}
	}
	f.after = nil
	return after
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// afterInFlight runs f once every nonblocking operation in flight when it
// is called, dropped and abandoned ones included (see inFlightOps), has
// completed: at once, on the calling goroutine, when there is none;
// otherwise on the goroutine whose call completes the last of them (Wait,
// Test, WaitAll or WaitAny on its Request, or, for a dropped or abandoned
// one, inFlightOps, Busy, Finalize or the start of a nonblocking operation).
// f must be quick and must not call into MPI. A caller that gave up
// operations on memory it owns (Request.Abandon, or a sendUntil or
// mrecvUntil that ended) frees that memory through afterInFlight, so that
// MPI never reads or writes it once freed.
func afterInFlight(f func()) {
	reap()
	a := &afterOps{f: f}
	registry.mu.Lock()
	for fl := range registry.live {
		fl.after = append(fl.after, a)
		a.n++
	}
	registry.mu.Unlock()
	if a.n == 0 {
		f()
	}
}

// complete reports whether every handle of f is done.
func (f *inflight) complete() bool {
	for _, h := range f.hs {
		if h != requestNull {
			return false
		}
	}
	return true
}

// orphan runs from the finalizer of a Request collected before its
// operation completed. It only marks the operation: finalizers must not
// block, and MPI may be finalising. reap completes it later.
func orphan(f *inflight) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, ok := registry.live[f]; ok && !f.lost {
		f.lost = true
		registry.lost.Add(1)
	}
}

// reap tests the operations whose Requests were dropped and releases those
// MPI has completed. It is cheap when nothing was dropped.
func reap() {
	if registry.lost.Load() == 0 {
		return
	}
	defer callTest.enter().leave() // before the registry lock, as Finalize
	var after []func()
	defer func() { runAll(after) }() // once the lock is released
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for f := range registry.live {
		if !f.lost {
			continue
		}
		var st C.tdmpi_status
		done, rc := f.test(&st)
		if rc != C.MPI_SUCCESS {
			// An error nobody can receive: the operation is over all the
			// same, and MPI has freed its handles.
			done = true
		}
		if done {
			after = append(after, f.unregister()...)
			registry.lost.Add(-1)
			f.pin.Unpin()
		}
	}
}

// inFlightOps returns the number of nonblocking operations started and not
// yet complete, including those whose Request was dropped, after releasing
// the dropped ones MPI has completed since. A program that drops Requests
// can call it to have their buffers unpinned and see what remains.
func inFlightOps() int {
	reap()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return len(registry.live)
}

// inFlight describes the operations in flight, such as
// "MPI_Isend ×2 (1 dropped), MPI_Irecv". The registry lock must be held.
func inFlight() string {
	type count struct{ n, lost int }
	counts := map[string]*count{}
	for f := range registry.live {
		c := counts[f.op]
		if c == nil {
			c = &count{}
			counts[f.op] = c
		}
		c.n++
		if f.lost {
			c.lost++
		}
	}
	var parts []string
	for op, c := range counts {
		s := op
		if c.n > 1 {
			s = fmt.Sprintf("%s ×%d", op, c.n)
		}
		if c.lost > 0 {
			s += fmt.Sprintf(" (%d dropped)", c.lost)
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
