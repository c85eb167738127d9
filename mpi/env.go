// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
)

// Thread support levels, in increasing order.
const (
	ThreadSingle     ThreadLevel = C.MPI_THREAD_SINGLE     // one thread only
	ThreadFunneled   ThreadLevel = C.MPI_THREAD_FUNNELED   // only the initialising thread calls MPI
	ThreadSerialized ThreadLevel = C.MPI_THREAD_SERIALIZED // any thread, one at a time
	ThreadMultiple   ThreadLevel = C.MPI_THREAD_MULTIPLE   // any thread, concurrently
)

// Wildcards and special values.
const (
	AnySource int = C.MPI_ANY_SOURCE // receive from any rank
	AnyTag    int = C.MPI_ANY_TAG    // receive with any tag
	ProcNull  int = C.MPI_PROC_NULL  // the null process: communication with it completes at once
	Undefined int = C.MPI_UNDEFINED  // Split colour of ranks that join no communicator; absent rank
)

// mainThread runs Init and Finalize on one locked OS thread: MPI requires
// MPI_Finalize to be called by the thread that initialised MPI, and a
// goroutine may move between threads unless it is locked to one.
var mainThread struct {
	once  sync.Once
	calls chan func()
}

func onMainThread(f func()) {
	mainThread.once.Do(func() {
		mainThread.calls = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: this thread is MPI's main thread
			for f := range mainThread.calls {
				f()
			}
		}()
	})
	done := make(chan struct{})
	mainThread.calls <- func() { f(); close(done) }
	<-done
}

var envMu sync.Mutex

// Init initialises MPI with thread level ThreadMultiple. It returns an error
// if MPI was initialised before or provides a lower level; in the latter
// case MPI is initialised all the same, and Finalize must still be called.
func Init() error {
	got, err := InitThread(ThreadMultiple)
	if err != nil {
		return err
	}
	if got < ThreadMultiple {
		return argError("MPI_Init_thread", C.MPI_ERR_OTHER, "provided thread level %v, need %v", got, ThreadMultiple)
	}
	return nil
}

// InitThread initialises MPI asking for thread support level, and returns
// the level MPI provides. It sets MPI_ERRORS_RETURN on World and Self.
// MPI_Init_thread runs on a dedicated locked OS thread, on which Finalize
// runs too, so callers need not lock their own goroutine.
func InitThread(level ThreadLevel) (ThreadLevel, error) {
	if level < ThreadSingle || level > ThreadMultiple {
		return 0, argError("MPI_Init_thread", C.MPI_ERR_ARG, "invalid thread level %d", int(level))
	}
	envMu.Lock()
	defer envMu.Unlock()
	if Initialized() {
		return 0, argError("MPI_Init_thread", C.MPI_ERR_OTHER, "MPI is already initialised")
	}
	if Finalized() {
		return 0, argError("MPI_Init_thread", C.MPI_ERR_OTHER, "MPI was finalised and cannot be initialised again")
	}
	if ucxEnvAtInit {
		ucxSignals()
	}
	var provided C.int
	var err error
	onMainThread(func() {
		var saved C.tdmpi_sigsave
		C.tdmpi_sig_save(&saved)
		err = newError("MPI_Init_thread", C.MPI_Init_thread(nil, nil, C.int(level), &provided))
		C.tdmpi_sig_restore(&saved)
	})
	if err != nil {
		return 0, err
	}
	for _, c := range []*Comm{&world, &self} {
		if err := c.setup(); err != nil {
			return ThreadLevel(provided), err
		}
	}
	return ThreadLevel(provided), nil
}

// ucxSignals sets UCX_ERROR_SIGNALS to empty unless the user has set it, so
// that UCX installs no handlers for SIGSEGV, SIGBUS and the like: Go's
// runtime needs them to turn faults into panics. It works where UCX is
// loaded by MPI_Init (Open MPI's UCX components are plugins): os.Setenv
// reaches C's environment, which UCX reads when it loads.
func ucxSignals() {
	if _, set := os.LookupEnv("UCX_ERROR_SIGNALS"); !set {
		os.Setenv("UCX_ERROR_SIGNALS", "")
	}
}

// Finalize finalises MPI, on the thread that initialised it. Every
// communicator made by Dup, Split or CreateGroup should be freed first.
//
// Finalize refuses, with an error that wraps ErrBusy and leaves MPI
// running, while another goroutine is inside an MPI call (blocked in Probe
// or Recv, say) or a nonblocking operation is incomplete, dropped Requests
// included (see Request): MPI_Finalize would free memory those use. The
// program completes or cancels them, and calls Finalize again. It first
// waits for the sends tdmpi made from copies (see "Buffers and memory")
// to complete, however long their receivers take, and reports one that
// failed (MPI is finalised all the same).
func Finalize() error {
	envMu.Lock()
	defer envMu.Unlock()
	if !Initialized() {
		return argError("MPI_Finalize", C.MPI_ERR_OTHER, "MPI is not initialised")
	}
	if Finalized() {
		return argError("MPI_Finalize", C.MPI_ERR_OTHER, "MPI is already finalised")
	}
	reap()
	copyErr := drainCopies()
	if !closeCalls() {
		return errors.Join(busyError("MPI_Finalize"), copyErr)
	}
	defer openCalls()
	if err := inFlightError("MPI_Finalize"); err != nil {
		return errors.Join(err, copyErr)
	}
	var err error
	onMainThread(func() {
		err = newError("MPI_Finalize", C.MPI_Finalize())
	})
	return errors.Join(copyErr, err)
}

// Busy returns nil if no goroutine is inside an MPI call and no
// nonblocking operation is in flight, and otherwise an error wrapping
// ErrBusy that names them: what makes Finalize refuse. It is a snapshot:
// calls may start or end right after. Sends from copies in flight do not
// count: Finalize waits for them.
func Busy() error {
	reap()
	if !closeCalls() {
		return busyError("MPI_Finalize")
	}
	defer openCalls()
	return inFlightError("MPI_Finalize")
}

func busyError(op string) error {
	calls := inProgress()
	if calls == "" {
		calls = "one starting or returning" // between the lock and its count
	}
	return fmt.Errorf("mpi: %s: %w: calls in progress on other goroutines: %s", op, ErrBusy, calls)
}

func inFlightError(op string) error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if n := len(registry.live); n > 0 {
		return fmt.Errorf("mpi: %s: %w: %d nonblocking operations in flight: %s", op, ErrBusy, n, inFlight())
	}
	return nil
}

// Initialized reports whether MPI has been initialised (even if it has
// been finalised since).
func Initialized() bool {
	var flag C.int
	C.MPI_Initialized(&flag)
	return flag != 0
}

// Finalized reports whether MPI has been finalised.
func Finalized() bool {
	var flag C.int
	C.MPI_Finalized(&flag)
	return flag != 0
}

// Abort asks MPI to end every process of c's job with the given exit code.
// The library never calls it; it is for programs that must stop a job.
func Abort(c *Comm, code int) error {
	h, err := c.handle("MPI_Abort")
	if err != nil {
		return err
	}
	return newError("MPI_Abort", C.MPI_Abort(h, C.int(code)))
}

// Wtime returns the elapsed wall-clock time in seconds since some time in
// the past, as MPI_Wtime.
func Wtime() float64 {
	return float64(C.MPI_Wtime())
}

// LibraryVersion returns the MPI library's version string, such as
// "Open MPI v4.1.4, ...".
func LibraryVersion() string {
	var buf [C.MPI_MAX_LIBRARY_VERSION_STRING + 1]C.char
	var n C.int
	if C.MPI_Get_library_version(&buf[0], &n) != C.MPI_SUCCESS {
		return ""
	}
	s := C.GoStringN(&buf[0], n)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == 0) {
		s = s[:len(s)-1]
	}
	return s
}
