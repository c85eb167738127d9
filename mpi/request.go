// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// #include "shim.h"
import "C"

import (
	"errors"
	"runtime"
	"unsafe"
)

// Request is a pending nonblocking operation made by Isend or Irecv. The
// buffer of the operation stays pinned in memory, so the garbage collector
// cannot move or free it, until the request completes through Wait, a
// successful Test, WaitAll or WaitAny. The caller must not touch the buffer
// before then.
//
// A Request must be used by one goroutine at a time; different requests
// may be waited on concurrently. Wait on a completed request returns its
// final status again.
type Request struct {
	h    C.MPI_Request
	pin  runtime.Pinner
	op   string
	k    kind
	size int
	done bool
	st   Status
}

func newRequest(op string, b buffer) *Request {
	r := &Request{h: requestNull, op: op, k: b.k, size: b.size}
	if b.ptr != nil {
		r.pin.Pin(b.ptr)
	}
	return r
}

// Isend starts sending buf to dest with tag, as MPI_Isend, and returns a
// request to complete with Wait or Test. buf must not be modified until then.
func Isend[T Scalar](c *Comm, buf []T, dest, tag int) (*Request, error) {
	const op = "MPI_Isend"
	h, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return nil, err
	}
	b := bufOf(buf)
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return nil, err
	}
	defer freeType(dt, derived) // MPI keeps the type alive until completion
	r := newRequest(op, b)
	var rh C.MPI_Request
	if err := newError(op, C.MPI_Isend(b.ptr, n, dt, C.int(dest), C.int(tag), h, &rh)); err != nil {
		r.pin.Unpin()
		return nil, err
	}
	r.h = rh
	return r, nil
}

// Irecv starts receiving a message from src with tag into buf, as
// MPI_Irecv, and returns a request to complete with Wait or Test. buf must
// not be read or written until then. buf must be large enough for the
// message: unlike Recv, Irecv cannot check the size before MPI writes, and
// Open MPI 4.1 may write a longer message past buf (see the package
// documentation). Use Mprobe and Mrecv when the size is not known.
func Irecv[T Scalar](c *Comm, buf []T, src, tag int) (*Request, error) {
	const op = "MPI_Irecv"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return nil, err
	}
	b := bufOf(buf)
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return nil, err
	}
	defer freeType(dt, derived)
	r := newRequest(op, b)
	var rh C.MPI_Request
	if err := newError(op, C.MPI_Irecv(b.ptr, n, dt, C.int(src), C.int(tag), h, &rh)); err != nil {
		r.pin.Unpin()
		return nil, err
	}
	r.h = rh
	return r, nil
}

// complete records the completion of r with status st, after the C call
// that completed it; rc is that call's return code.
func (r *Request) complete(rc C.int, st *C.tdmpi_status) error {
	if r.h == requestNull {
		r.done = true
		r.pin.Unpin()
		r.st = makeStatus(st)
	}
	return newError(r.op, rc)
}

// Wait blocks until r completes, as MPI_Wait, and returns the status of a
// receive (for a send, only Cancelled is meaningful).
func (r *Request) Wait() (Status, error) {
	if r == nil {
		return Status{}, argError("MPI_Wait", C.MPI_ERR_REQUEST, "nil request")
	}
	if r.done {
		return r.st, nil
	}
	var st C.tdmpi_status
	h := r.h
	rc := C.tdmpi_wait(&h, datatypes[r.k], C.longlong(r.size), &st)
	r.h = h
	if err := r.complete(rc, &st); err != nil {
		return Status{}, err
	}
	return r.st, nil
}

// Test reports whether r has completed, as MPI_Test, and its status if so.
func (r *Request) Test() (done bool, st Status, err error) {
	if r == nil {
		return false, Status{}, argError("MPI_Test", C.MPI_ERR_REQUEST, "nil request")
	}
	if r.done {
		return true, r.st, nil
	}
	var cst C.tdmpi_status
	var flag C.int
	h := r.h
	rc := C.tdmpi_test(&h, &flag, datatypes[r.k], C.longlong(r.size), &cst)
	r.h = h
	if flag == 0 && rc == C.MPI_SUCCESS {
		return false, Status{}, nil
	}
	if err := r.complete(rc, &cst); err != nil {
		return r.done, Status{}, err
	}
	return true, r.st, nil
}

// Cancel asks MPI to cancel r, as MPI_Cancel. The request must still be
// completed with Wait (or Test); its Status then reports Cancelled if the
// cancellation succeeded, and the buffer is released.
func (r *Request) Cancel() error {
	const name = "MPI_Cancel"
	if r == nil {
		return argError(name, C.MPI_ERR_REQUEST, "nil request")
	}
	if r.done {
		return nil
	}
	h := r.h
	return newError(name, C.MPI_Cancel(&h))
}

// handles collects the MPI handles of reqs; completed and nil requests
// become MPI_REQUEST_NULL.
func handles(reqs []*Request) []C.MPI_Request {
	hs := make([]C.MPI_Request, len(reqs))
	for i, r := range reqs {
		hs[i] = requestNull
		if r != nil && !r.done {
			hs[i] = r.h
		}
	}
	return hs
}

// WaitAll blocks until every request of reqs completes, as MPI_Waitall.
// nil and already completed requests are ignored. The status of each request
// is then available from its Wait method. The error joins the errors of the
// requests that failed.
func WaitAll(reqs ...*Request) error {
	const name = "MPI_Waitall"
	if len(reqs) == 0 {
		return nil
	}
	n, err := count32(name, len(reqs))
	if err != nil {
		return err
	}
	hs := handles(reqs)
	sts := make([]C.MPI_Status, len(reqs))
	rc := C.MPI_Waitall(n, unsafe.SliceData(hs), unsafe.SliceData(sts))
	var errs []error
	for i, r := range reqs {
		if r == nil || r.done {
			continue
		}
		r.h = hs[i]
		code := C.int(C.MPI_SUCCESS)
		if rc == C.MPI_ERR_IN_STATUS {
			if e := C.tdmpi_status_error(&sts[i]); e != C.MPI_ERR_PENDING {
				code = e
			}
		}
		st := C.tdmpi_status{st: sts[i]}
		if code == C.MPI_SUCCESS && r.h == requestNull {
			code = C.tdmpi_finish(code, &st, datatypes[r.k], C.longlong(r.size))
		}
		if err := r.complete(code, &st); err != nil {
			errs = append(errs, err)
		}
	}
	if rc != C.MPI_SUCCESS && rc != C.MPI_ERR_IN_STATUS {
		errs = append(errs, newError(name, rc))
	}
	return errors.Join(errs...)
}

// WaitAny blocks until one request of reqs completes, as MPI_Waitany, and
// returns its index and status. nil and completed requests are ignored; if
// there is no other, WaitAny returns index Undefined at once.
func WaitAny(reqs ...*Request) (index int, st Status, err error) {
	const name = "MPI_Waitany"
	n, err := count32(name, len(reqs))
	if err != nil {
		return Undefined, Status{}, err
	}
	hs := handles(reqs)
	var cst C.MPI_Status
	var idx C.int
	var ph *C.MPI_Request
	if len(hs) > 0 {
		ph = &hs[0]
	}
	rc := C.MPI_Waitany(n, ph, &idx, &cst)
	if idx == C.MPI_UNDEFINED || idx < 0 || int(idx) >= len(reqs) {
		return Undefined, Status{}, newError(name, rc)
	}
	r := reqs[idx]
	r.h = hs[idx]
	cs := C.tdmpi_status{st: cst}
	if rc == C.MPI_SUCCESS {
		rc = C.tdmpi_finish(rc, &cs, datatypes[r.k], C.longlong(r.size))
	}
	if err := r.complete(rc, &cs); err != nil {
		return int(idx), Status{}, err
	}
	return int(idx), r.st, nil
}
