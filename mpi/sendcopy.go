// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #cgo noescape tdmpi_copy_send_start
// #cgo nocallback tdmpi_copy_send_start
// #cgo noescape tdmpi_copy_send_test
// #cgo nocallback tdmpi_copy_send_test
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// copySendSlots is how many sends of copies may be in flight at once;
// past it, sendCopy declines, and its caller sends as usual.
const copySendSlots = 64

// copySends is the sends sendCopy started: out, in flight, oldest first;
// free, done, for the next ones (C memory, never freed); failed, the
// error of a send that completed in error and that no sendCopy has
// reported yet.
var copySends struct {
	mu     sync.Mutex
	out    []*C.tdmpi_copy_send
	free   []*C.tdmpi_copy_send
	failed error
}

var callCopySend = newCallCount("MPI_Isend (from a copy)")

// sendCopy sends the bytes of buf to rank dest of c with tag, as Send
// does, from a copy that package mpi keeps in C memory: it returns once
// MPI has started the send (MPI_Isend), without waiting for it to
// complete, and buf may be reused at once. MPI orders the message with
// the others from this process to dest on c and tag, as any send.
//
// It is for messages that a blocking Send would hold the caller for: with
// Open MPI over shared memory, a send of more than 256 bytes (its inline
// size) completes only once the receiving process has entered MPI and
// taken it, which, when the receiver is busy outside MPI, can take far
// longer than the message's transfer. The send of a copy moves all the
// same (it is under the eager limit, copySendMax), and package mpi
// completes it in a later call: sendCopy tests the sends it started
// before, oldest first, waitCopies waits for them, and Finalize waits for
// those still in flight.
//
// sent is false, with a nil error, when buf is longer than copySendMax,
// when 64 sends of copies are still in flight, and when no C memory is
// left: nothing was sent, and the caller sends otherwise. An error is that
// of the arguments or of MPI_Isend, or, joined to it, that of an earlier
// send of a copy that completed in error (reported once).
func sendCopy(c *Comm, buf []byte, dest, tag int) (sent bool, err error) {
	const op = "MPI_Isend"
	h, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return false, err
	}
	if len(buf) > copySendMax {
		return false, nil
	}
	defer callCopySend.enter().leave()
	copySends.mu.Lock()
	defer copySends.mu.Unlock()
	reapCopies()
	if failed := copySends.failed; failed != nil {
		copySends.failed = nil
		defer func() { err = errors.Join(err, fmt.Errorf("mpi: an earlier send from a copy failed: %w", failed)) }()
	}
	if len(copySends.out) >= copySendSlots {
		return false, nil
	}
	var s *C.tdmpi_copy_send
	if n := len(copySends.free); n > 0 {
		s = copySends.free[n-1]
		copySends.free = copySends.free[:n-1]
	} else if s = C.tdmpi_copy_send_new(copySendMax); s == nil {
		return false, nil
	}
	var p *C.tdmpi_mem
	if len(buf) > 0 {
		p = bytesMem(buf)
	}
	if err := newError(op, C.tdmpi_copy_send_start(s, p, C.int(len(buf)), C.int(dest), C.int(tag), h)); err != nil {
		copySends.free = append(copySends.free, s)
		return false, err
	}
	copySends.out = append(copySends.out, s)
	return true, nil
}

// reapCopies tests the sends of copies in flight, oldest first, until one
// has not completed, and makes those that did free again. The caller
// holds copySends.mu.
func reapCopies() {
	done := 0
	for _, s := range copySends.out {
		var flag C.int
		rc := C.tdmpi_copy_send_test(s, &flag)
		if err := newError("MPI_Test", rc); err != nil {
			// MPI_Test set the request to null or left it: either way the
			// send is over for this package, and its error is kept.
			if copySends.failed == nil {
				copySends.failed = err
			}
		} else if flag == 0 {
			break
		}
		done++
	}
	if done == 0 {
		return
	}
	copySends.free = append(copySends.free, copySends.out[:done]...)
	n := copy(copySends.out, copySends.out[done:])
	clear(copySends.out[n:])
	copySends.out = copySends.out[:n]
}

// waitCopies waits up to d for the sends of copies (sendCopy) in flight to
// complete, and returns how many have not; d <= 0 only tests them. err is
// the error of one that completed in error, not reported before. A
// program that lets its receivers take their messages late (after long
// work) can call it before Finalize, which waits for them however long it
// takes, as a blocking send would have.
func waitCopies(d time.Duration) (n int, err error) {
	defer callTest.enter().leave() // before the lock, as reap
	copySends.mu.Lock()
	defer copySends.mu.Unlock()
	var p Pacer
	deadline := time.Now().Add(d)
	for reapCopies(); len(copySends.out) > 0 && time.Now().Before(deadline); reapCopies() {
		copySends.mu.Unlock()
		p.Pause()
		copySends.mu.Lock()
	}
	if failed := copySends.failed; failed != nil {
		copySends.failed = nil
		err = fmt.Errorf("mpi: an earlier send from a copy failed: %w", failed)
	}
	return len(copySends.out), err
}

// drainCopies waits for every send of a copy in flight to complete, for
// as long as it takes (MPI_Finalize would wait for the peers anyway), and
// returns the error of one that failed, not reported before.
func drainCopies() error {
	var errs []error
	for {
		n, err := waitCopies(time.Second)
		errs = append(errs, err)
		if n == 0 {
			return errors.Join(errs...)
		}
	}
}
