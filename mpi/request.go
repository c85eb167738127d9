// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
// #cgo noescape tdmpi_wait_req
// #cgo nocallback tdmpi_wait_req
// #cgo noescape tdmpi_wait_all
// #cgo nocallback tdmpi_wait_all
// #cgo noescape MPI_Test
// #cgo nocallback MPI_Test
// #cgo noescape tdmpi_finish
// #cgo nocallback tdmpi_finish
import "C"

import (
	"errors"
	"runtime"
	"sync"
	"unsafe"
)

// Request is a pending nonblocking operation: a point-to-point message
// started by Isend or Irecv, or a collective started by Ibcast,
// Iallreduce, Ireduce, Iallgatherv, Igatherv or Iscatterv. Its buffers stay
// pinned in memory, so the garbage collector can neither move nor free
// them, until the operation completes through Wait, a successful Test,
// WaitAll or WaitAny. The caller must not touch the buffers before then.
//
// A Request dropped before completion does not crash the process and its
// buffers are not freed under MPI: the operation stays registered in the
// package with its buffers pinned, and once MPI reports it complete,
// which the package checks whenever a nonblocking operation starts and in
// Busy and Finalize, its buffers are unpinned and can be collected. A dropped receive still receives its message, into a buffer
// nobody reads; Finalize refuses to run while such operations are
// incomplete, since MPI forbids finalising with requests pending.
//
// A Request may be used by several goroutines at once. Of Wait, Await,
// Test, WaitAll and WaitAny called on one request concurrently, one
// completes it and the others return its result too, each once the
// request has completed (a Test or Await that finds it pending returns
// done false). Once complete, every later call returns the same status
// and error again. Cancel and Abandon act between the slices of a
// concurrent Wait (see Await); while a WaitAll or WaitAny that holds the
// request runs in MPI, they wait for it to return.
type Request struct {
	mu   sync.Mutex // held by each call on the request, and by WaitAll and WaitAny while in MPI
	f    *inflight  // nil once complete or abandoned
	op   string
	done bool
	gone bool // abandoned (see Abandon)
	st   Status
	err  error // the error of the completion, if it failed
	// Where the wait for the operation is, across the calls of Await and
	// Wait (see tdmpi_wait_req).
	waitStart C.longlong
	waitPhase C.int
}

// pauseMaxBytes is the size of the largest operation (its largest buffer)
// whose wait pauses between tests as a blocking receive's does, yielding
// the core, then sleeping (see "Waiting" in the package documentation). A
// long wait for a smaller one is spent waiting for a peer; the data of a
// larger one may still be moving, in the tests themselves, so its wait
// never pauses.
const pauseMaxBytes = 64 << 10

// newRequest returns the Request of operation op on elements of kind k and
// size bytes, whose largest buffer holds bytes bytes, with bufs pinned.
func newRequest(op string, k kind, size int, coll bool, bytes C.longlong, bufs ...unsafe.Pointer) *Request {
	return &Request{f: newInflight(op, k, size, coll, bytes, bufs...), op: op}
}

// newInflight returns the record of an operation op on elements of kind k
// and size bytes, whose largest buffer holds bytes bytes, with bufs pinned.
func newInflight(op string, k kind, size int, coll bool, bytes C.longlong, bufs ...unsafe.Pointer) *inflight {
	f := &inflight{op: op, k: k, size: size, coll: coll, pause: bytes <= pauseMaxBytes}
	for _, p := range bufs {
		if p != nil {
			f.pin.Pin(p)
		}
	}
	return f
}

// post posts a piece of r's operation with call, which MPI gives the
// handle of its piece, and keeps the handle if MPI accepted it. The
// handles have an allocation of their own: cgo's pointer check refuses a
// pointer into an object that holds Go pointers.
func (r *Request) post(call func(q *C.MPI_Request) C.int) C.int {
	f := r.f
	f.hs = append(f.hs, requestNull)
	rc := call(&f.hs[len(f.hs)-1])
	if rc != C.MPI_SUCCESS {
		f.hs = f.hs[:len(f.hs)-1]
	}
	return rc
}

// start registers r once MPI has accepted its operation, whose pieces
// post gave handles to; on failure (err != nil) it frees the pieces MPI
// accepted, unpins r's buffers and returns err.
func (r *Request) start(err error) (*Request, error) {
	if err != nil {
		for _, h := range r.f.hs {
			C.tdmpi_request_free(h) // earlier pieces of a failed reduction
		}
		r.f.hs = nil
		r.f.pin.Unpin()
		return nil, err
	}
	register(r.f)
	// A finalizer, not a cleanup: it needs no allocation (a cleanup
	// made two, of a closure and its argument, per request).
	runtime.SetFinalizer(r, (*Request).dropped)
	return r, nil
}

// dropped runs as the finalizer of a Request collected before its
// operation completed (see orphan).
func (r *Request) dropped() {
	if f := r.f; f != nil {
		orphan(f)
	}
}

// Isend starts sending buf to dest with tag, as MPI_Isend, and returns a
// request to complete with Wait or Test. buf must not be modified until then.
func Isend[T Scalar](c *Comm, buf []T, dest, tag int) (*Request, error) {
	const op = "MPI_Isend"
	w, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return nil, err
	}
	b := bufOf(buf)
	return istart(op, b, false, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer, q *C.MPI_Request) C.int {
		return C.tdmpi_isend(b.mem(), n, b.typeWord(dt), C.int(dest), C.int(tag), w, q)
	})
}

// Irecv starts receiving a message from src with tag into buf, as
// MPI_Irecv, and returns a request to complete with Wait or Test. buf must
// not be read or written until then. buf must be large enough for the
// message: unlike Recv, Irecv cannot check the size before MPI writes, and
// Open MPI 4.1 may write a longer message past buf (see the package
// documentation). Use Mprobe and Mrecv when the size is not known.
func Irecv[T Scalar](c *Comm, buf []T, src, tag int) (*Request, error) {
	const op = "MPI_Irecv"
	w, err := c.recvArgs(op, src, tag)
	if err != nil {
		return nil, err
	}
	b := bufOf(buf)
	return istart(op, b, false, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer, q *C.MPI_Request) C.int {
		return C.tdmpi_irecv(b.mem(), n, b.typeWord(dt), C.int(src), C.int(tag), w, q)
	})
}

// istart starts the nonblocking operation op on the one buffer b, which is
// described as for a blocking call (by a derived datatype beyond 2^31-1
// elements), by calling call with its datatype, count and address.
func istart(op string, b buffer, coll bool, call func(dt C.MPI_Datatype, n C.int, p unsafe.Pointer, q *C.MPI_Request) C.int) (*Request, error) {
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return nil, err
	}
	defer freeType(dt, derived) // MPI keeps the type alive until completion
	reap()
	r := newRequest(op, b.k, b.size, coll, b.bytes(), b.ptr)
	return r.start(newError(op, r.post(func(q *C.MPI_Request) C.int { return call(dt, n, b.ptr, q) })))
}

// startUntil starts an operation on b with start, then waits for it in C
// until it completes or done closes (nil: never), with no Request: the
// one call of ibcastWait, sendUntil and mrecvUntil. b is pinned while MPI
// may use it; the wait pauses between tests with pause (see
// tdmpi_wait_req). err is start's failure (nothing started). When done
// closes first and the operation is still under way, it is handed to the
// registry as an abandoned Request would be (b stays pinned until it
// completes, see reap) and ended is true; otherwise rc is the wait's
// result, and *cst its status. start's C function returns its request by
// value (tdmpi_started), so that nothing here is allocated.
func startUntil(op string, b buffer, coll, pause bool, done <-chan struct{}, cst *C.tdmpi_status,
	start func(dt C.MPI_Datatype, n C.int, p unsafe.Pointer) C.tdmpi_started) (rc C.int, ended bool, err error) {
	return startUntilAlso(op, b, nil, coll, pause, done, cst, start)
}

// startUntilAlso is startUntil of an operation that uses the memory at
// also (nil: none) beside b's: it is pinned with b.
func startUntilAlso(op string, b buffer, also unsafe.Pointer, coll, pause bool, done <-chan struct{}, cst *C.tdmpi_status,
	start func(dt C.MPI_Datatype, n C.int, p unsafe.Pointer) C.tdmpi_started) (rc C.int, ended bool, err error) {
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return 0, false, err
	}
	defer freeType(dt, derived) // MPI keeps the type alive until completion
	var pin runtime.Pinner      // MPI uses b between the slices of the wait
	for _, p := range [2]unsafe.Pointer{b.ptr, also} {
		if p != nil {
			pin.Pin(p)
		}
	}
	defer pin.Unpin()
	defer callWait.enter().leave()
	s := start(dt, n, b.ptr)
	if err := newError(op, s.rc); err != nil {
		return s.rc, false, err
	}
	q := s.q
	rc, ended = waitingUntil(done, func() C.int { return C.tdmpi_wait_req(&q, cst, cbool(pause)) })
	if !ended {
		return rc, false, nil
	}
	var flag C.int
	if rc = C.MPI_Test(&q, &flag, &cst.st); rc != C.MPI_SUCCESS || flag != 0 {
		return rc, false, nil // it completed (or failed) as done closed
	}
	f := newInflight(op, b.k, b.size, coll, b.bytes(), b.ptr, also) // pinned anew: the wait's own pin goes on return
	f.hs = []C.MPI_Request{q}
	register(f)
	orphan(f) // reap completes it
	return rc, true, nil
}

// untilPause is how sendUntil and mrecvUntil pause their tests: at any
// size, as the polling waits bounded by a context did (xfer.Poll).
// Without pause at 64 MiB, TestReceiveStallMidPayload, whose sender
// trickles its payload out over TCP so that the receive is still under
// way at its deadline, hung once (run beside a make test): the receive
// ended without being given up, most likely whole, the unpaused tests
// draining the socket as fast as the sender filled it.
const untilPause = true

// finish records the completion of r's operation, whose status st was
// filled in by the C call that completed it, with MPI error code rc. r's
// lock is held.
func (r *Request) finish(st *C.tdmpi_status, rc C.int) {
	f := r.f
	r.done, r.f = true, nil
	if !f.coll {
		r.st = makeStatus(st)
	}
	r.err = newError(r.op, rc)
	runtime.SetFinalizer(r, nil)
	f.release()
}

// result returns the result of r, complete: its status, or the error of
// its completion. r's lock is held.
func (r *Request) result() (done bool, st Status, err error) {
	if r.err != nil {
		return true, Status{}, r.err
	}
	return true, r.st, nil
}

// status completes the MPI status of a point-to-point request.
func (f *inflight) status(st *C.tdmpi_status) C.int {
	if f.coll {
		return C.MPI_SUCCESS
	}
	return C.tdmpi_finish(C.MPI_SUCCESS, st, datatypes[f.k], C.longlong(f.size))
}

// Wait blocks until r completes, as MPI_Wait, and returns the status of a
// receive (for a send, only Cancelled is meaningful; for a collective, the
// zero Status). It tests r in a loop, which pauses between tests as a
// blocking receive's does when r's operation is at most 64 KiB: it yields
// the core once it has waited 20 us, and sleeps once it has waited 1 ms
// (see "Waiting" in the package documentation).
func (r *Request) Wait() (Status, error) {
	_, st, err := r.wait(true)
	return st, err
}

// Await waits for r as Wait does, for one slice of the wait: it returns
// done false, r still pending, after 10 us of testing, or after one sleep
// once the wait has lasted 1 ms (counted from the first Await). A loop
// that waits for r while it watches something else, a context, calls Await
// rather than Test, which returns at once and never pauses. Once r
// completes, Await returns its status, as Wait.
func (r *Request) Await() (done bool, st Status, err error) { return r.wait(false) }

// wait is Wait (block) or Await: slices of r's wait (slice), with yield
// between (see waiting).
func (r *Request) wait(block bool) (done bool, st Status, err error) {
	if r == nil {
		return false, Status{}, argError("MPI_Wait", C.MPI_ERR_REQUEST, "nil request")
	}
	defer callWait.enter().leave()
	if !block {
		return r.slice()
	}
	waiting(func() C.int {
		if done, st, err = r.slice(); !done && err == nil {
			return C.TDMPI_AGAIN
		}
		return C.MPI_SUCCESS
	})
	return done, st, err
}

// slice is one slice of r's wait, under r's lock: tdmpi_wait_req over r's
// pending handles, resumed where the last slice of r's wait ended, by
// whichever goroutine.
func (r *Request) slice() (done bool, st Status, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return r.result()
	}
	if r.gone {
		return false, Status{}, r.errGone("MPI_Wait")
	}
	f := r.f
	cst := C.tdmpi_status{wait_start: r.waitStart, wait_phase: r.waitPhase}
	rc := C.int(C.MPI_SUCCESS)
	for i := range f.hs {
		if f.hs[i] == requestNull {
			continue
		}
		if rc = C.tdmpi_wait_req(&f.hs[i], &cst, cbool(f.pause)); rc != C.MPI_SUCCESS {
			break
		}
	}
	r.waitStart, r.waitPhase = cst.wait_start, cst.wait_phase
	if rc == C.TDMPI_AGAIN {
		return false, Status{}, nil
	}
	if rc == C.MPI_SUCCESS {
		rc = f.status(&cst)
	}
	if f.complete() {
		r.finish(&cst, rc) // MPI frees a failed request too
		return r.result()
	}
	return false, Status{}, newError(r.op, rc)
}

// Abandon hands r's operation to the package: the caller will neither wait
// for it nor test it again, as when its Request is dropped (see Request),
// but without waiting for the garbage collector to notice. The package
// completes it as it completes dropped requests, in Busy, Finalize and
// whenever a nonblocking operation starts, and unpins its
// buffers then. Abandon on a completed, abandoned or nil request does
// nothing. Every later call on an abandoned request (and any call still
// waiting for it) returns an error wrapping ErrRequest; WaitAny ignores it.
func (r *Request) Abandon() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	f := r.f
	r.f, r.gone = nil, true
	runtime.SetFinalizer(r, nil)
	orphan(f)
}

// errGone is returned by the calls on an abandoned request.
func (r *Request) errGone(op string) error {
	return argError(op, C.MPI_ERR_REQUEST, "%s request was abandoned", r.op)
}

// Op returns the name of the MPI function that started r, such as
// "MPI_Ibcast", for messages.
func (r *Request) Op() string { return r.op }

// Test reports whether r has completed, as MPI_Test, and its status if so.
func (r *Request) Test() (done bool, st Status, err error) {
	if r == nil {
		return false, Status{}, argError("MPI_Test", C.MPI_ERR_REQUEST, "nil request")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return false, Status{}, r.errGone("MPI_Test")
	}
	return r.test()
}

// test is Test on r, not abandoned, under r's lock.
func (r *Request) test() (done bool, st Status, err error) {
	if r.done {
		return r.result()
	}
	defer callTest.enter().leave()
	f := r.f
	var cst C.tdmpi_status
	flag, rc := f.test(&cst)
	if rc != C.MPI_SUCCESS {
		if f.complete() {
			r.finish(&cst, rc)
			return r.result()
		}
		return false, Status{}, newError(r.op, rc)
	}
	if !flag {
		return false, Status{}, nil
	}
	r.finish(&cst, rc)
	return r.result()
}

// test tests every handle of f, as MPI_Test, and fills st once all are
// complete.
func (f *inflight) test(st *C.tdmpi_status) (bool, C.int) {
	all := true
	for i := range f.hs {
		if f.hs[i] == requestNull {
			continue
		}
		var flag C.int
		if rc := C.MPI_Test(&f.hs[i], &flag, &st.st); rc != C.MPI_SUCCESS {
			return false, rc
		}
		all = all && flag != 0
	}
	if !all {
		return false, C.MPI_SUCCESS
	}
	return true, f.status(st)
}

// Cancel asks MPI to cancel r, as MPI_Cancel. The request must still be
// completed with Wait (or Test); its Status then reports Cancelled if the
// cancellation succeeded, and the buffer is released. Collectives cannot
// be cancelled, nor can an abandoned request (an error wrapping
// ErrRequest); Cancel of a completed request does nothing.
func (r *Request) Cancel() error {
	const name = "MPI_Cancel"
	if r == nil {
		return argError(name, C.MPI_ERR_REQUEST, "nil request")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.done:
		return nil
	case r.gone:
		return r.errGone(name)
	case r.f.coll:
		return argError(name, C.MPI_ERR_REQUEST, "%s cannot be cancelled", r.op)
	}
	h := r.f.hs[0]
	return newError(name, C.MPI_Cancel(&h))
}

// lockAll locks the requests of reqs that are not nil, each once, without
// waiting: it reports false, with none locked, when another goroutine
// holds one of them or reqs holds one twice. The caller then completes
// them one at a time.
func lockAll(reqs []*Request) bool {
	for i, r := range reqs {
		if r != nil && !r.mu.TryLock() {
			unlockAll(reqs[:i])
			return false
		}
	}
	return true
}

// unlockAll unlocks the requests of reqs that are not nil.
func unlockAll(reqs []*Request) {
	for _, r := range reqs {
		if r != nil {
			r.mu.Unlock()
		}
	}
}

// WaitAll blocks until every request of reqs completes, as MPI_Waitall.
// nil requests are ignored, and so are completed ones, but for the error
// of their completion; an abandoned one is an error. The status of each
// request is then available from its Wait method. The error joins the
// errors of the requests that failed. It tests the requests in a loop
// (MPI_Testall), which pauses as Wait's does when every operation is at
// most 64 KiB. When another goroutine is using one of reqs, or reqs holds
// one twice, WaitAll waits for each in turn, as Wait.
func WaitAll(reqs ...*Request) error {
	const name = "MPI_Waitall"
	if !lockAll(reqs) {
		var errs []error
		for _, r := range reqs {
			if r != nil {
				if _, err := r.Wait(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	}
	defer unlockAll(reqs)
	var hs []C.MPI_Request
	var errs []error
	pause := true // every operation is small enough (see pauseMaxBytes)
	for _, r := range reqs {
		switch {
		case r == nil:
		case r.done:
			if r.err != nil {
				errs = append(errs, r.err)
			}
		case r.gone:
			errs = append(errs, r.errGone(name))
		default:
			hs = append(hs, r.f.hs...)
			pause = pause && r.f.pause
		}
	}
	if len(hs) == 0 {
		return errors.Join(errs...)
	}
	n, err := count32(name, len(hs))
	if err != nil {
		return err
	}
	defer callWaitall.enter().leave()
	sts := make([]C.MPI_Status, len(hs))
	var cst C.tdmpi_status // where the wait is, across its slices
	rc := waiting(func() C.int {
		return C.tdmpi_wait_all(n, unsafe.SliceData(hs), unsafe.SliceData(sts), &cst, cbool(pause))
	})
	i := 0
	for _, r := range reqs {
		if r == nil || r.done || r.gone {
			continue
		}
		f := r.f
		code := C.int(C.MPI_SUCCESS)
		for j := range f.hs {
			f.hs[j] = hs[i+j]
			if rc == C.MPI_ERR_IN_STATUS && code == C.MPI_SUCCESS {
				if e := C.tdmpi_status_error(&sts[i+j]); e != C.MPI_ERR_PENDING && e != C.MPI_SUCCESS {
					code = e
				}
			}
		}
		st := C.tdmpi_status{st: sts[i]}
		i += len(f.hs)
		if code == C.MPI_SUCCESS && f.complete() {
			code = f.status(&st)
		}
		if f.complete() {
			r.finish(&st, code) // MPI frees a failed request too
		}
		if err := newError(r.op, code); err != nil {
			errs = append(errs, err)
		}
	}
	if rc != C.MPI_SUCCESS && rc != C.MPI_ERR_IN_STATUS {
		errs = append(errs, newError(name, rc))
	}
	return errors.Join(errs...)
}

// WaitAny blocks until one request of reqs completes, as MPI_Waitany, and
// returns its index and status. nil, completed and abandoned requests are
// ignored; if there is no other, WaitAny returns index Undefined at once.
// A reduction over more than 2^30 elements is several MPI requests: with
// one among reqs, WaitAny polls them with Test instead, as it does when
// another goroutine is using one of reqs, or reqs holds one twice.
func WaitAny(reqs ...*Request) (index int, st Status, err error) {
	if !lockAll(reqs) {
		return pollAny(reqs)
	}
	index, st, poll, err := waitAny(reqs)
	unlockAll(reqs)
	if poll {
		return pollAny(reqs)
	}
	return index, st, err
}

// waitAny is WaitAny with MPI_Waitany, with reqs locked; it reports poll
// true, having done nothing, when one of reqs is several MPI requests.
func waitAny(reqs []*Request) (index int, st Status, poll bool, err error) {
	const name = "MPI_Waitany"
	hs := make([]C.MPI_Request, len(reqs))
	live := false
	for i, r := range reqs {
		hs[i] = requestNull
		if r == nil || r.done || r.gone {
			continue
		}
		if len(r.f.hs) > 1 {
			return Undefined, Status{}, true, nil
		}
		hs[i], live = r.f.hs[0], true
	}
	if !live {
		return Undefined, Status{}, false, nil
	}
	n, err := count32(name, len(reqs))
	if err != nil {
		return Undefined, Status{}, false, err
	}
	defer callWaitany.enter().leave()
	var cst C.MPI_Status
	var idx C.int
	rc := C.MPI_Waitany(n, &hs[0], &idx, &cst)
	if idx == C.MPI_UNDEFINED || idx < 0 || int(idx) >= len(reqs) {
		return Undefined, Status{}, false, newError(name, rc)
	}
	r := reqs[idx]
	r.f.hs[0] = hs[idx]
	cs := C.tdmpi_status{st: cst}
	if rc == C.MPI_SUCCESS {
		rc = r.f.status(&cs)
	}
	if r.f.complete() {
		r.finish(&cs, rc)
	}
	if err := newError(r.op, rc); err != nil {
		return int(idx), Status{}, false, err
	}
	return int(idx), r.st, false, nil
}

// pollAny is WaitAny by polling each request with Test, pausing between
// rounds as a Pacer does.
func pollAny(reqs []*Request) (int, Status, error) {
	var p Pacer
	for {
		live := false
		for i, r := range reqs {
			if r == nil {
				continue
			}
			r.mu.Lock()
			active := !r.done && !r.gone
			var done bool
			var st Status
			var err error
			if active {
				done, st, err = r.test()
			}
			r.mu.Unlock()
			if err != nil || done {
				return i, st, err
			}
			live = live || active
		}
		if !live {
			return Undefined, Status{}, nil
		}
		p.Pause()
	}
}

// makeStatus converts s, filled in by a C wrapper of shim.h.
func makeStatus(s *C.tdmpi_status) Status {
	return Status{
		Source:    int(s.st.MPI_SOURCE),
		Tag:       int(s.st.MPI_TAG),
		bytes:     int64(s.bytes),
		cancelled: s.cancelled != 0,
	}
}
