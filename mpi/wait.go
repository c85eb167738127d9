// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import (
	"runtime"
	"time"
	_ "unsafe" // go:linkname
)

// DefaultSpinWait is how long a blocking receive or probe polls MPI before
// it starts to yield its core between polls (see SetSpinWait); from 1 ms of
// waiting it sleeps between them instead.
const DefaultSpinWait = 20 * time.Microsecond

// yield lets the Go scheduler run other goroutines on the caller's
// processor (runtime.Gosched), as this package's blocking waits do every
// 10 us they poll, and reports whether it did: not when the calling
// goroutine is locked to its thread (runtime.LockOSThread), where the
// scheduler would hand the processor to another thread and back (22-32
// us a call on this project's machines, against 80-96 ns). A loop that
// polls MPI (Request.Test, Iprobe) calls it between polls.
func yield() bool {
	if lockedOSThread() {
		return false
	}
	runtime.Gosched()
	return true
}

// lockedOSThread reports whether the calling goroutine is locked to its
// thread. It is the runtime's, which runtime/linkname.go keeps linkable
// (for tests outside the runtime); should it go, the build fails here, it
// does not misbehave.
//
//go:linkname lockedOSThread runtime.lockedOSThread
func lockedOSThread() bool
