// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
// #cgo noescape tdmpi_mprobe
// #cgo nocallback tdmpi_mprobe
// #cgo nocallback tdmpi_imrecv_start
// #cgo noescape tdmpi_improbe
// #cgo nocallback tdmpi_improbe
// #cgo noescape tdmpi_mrecv
// #cgo nocallback tdmpi_mrecv
// #cgo noescape tdmpi_recv_exact
// #cgo nocallback tdmpi_recv_exact
// #cgo noescape tdmpi_mrecv_pair
// #cgo nocallback tdmpi_mrecv_pair
import "C"

import (
	"math"
	"unsafe"
)

// Message is a message matched by Mprobe or Improbe and removed from the
// matching queue: no other receive can take it. Receive it with Mrecv,
// exactly once.
type Message struct {
	h     C.tdmpi_word // the MPI_Message handle, as a word (see tdmpi_word in shim.h)
	bytes C.longlong   // size from the probe, -1 if unknown
}

// Mprobe blocks until a message from src with tag arrives, matches it, and
// returns it with its status, as MPI_Mprobe. Safe with several goroutines
// receiving on c: each matched message goes to exactly one caller.
func Mprobe(c *Comm, src, tag int) (*Message, Status, error) {
	m := new(Message)
	st, err := MprobeInto(m, c, src, tag)
	if err != nil {
		return nil, Status{}, err
	}
	return m, st, nil
}

// MprobeInto is Mprobe storing the matched message in *m instead of a new
// Message, for receive loops that must not allocate. *m must not hold a
// message still to be received.
func MprobeInto(m *Message, c *Comm, src, tag int) (Status, error) {
	st, _, err := mprobeUntil(m, c, src, tag, nil)
	return st, err
}

// mprobeUntil is MprobeInto whose wait ends once done is closed (nil: it
// never does), with nothing matched: ended is then true and *m is left as
// it was. done is checked each time the wait returns to Go, after 10 us
// of polling or one of its naps once it has waited 1 ms (see "Waiting" in
// the package documentation), so the wait ends within about a millisecond
// of done's closing: a receive bounded by a context then costs no more
// than a blocking one while its message comes in time.
func mprobeUntil(m *Message, c *Comm, src, tag int, done <-chan struct{}) (st Status, ended bool, err error) {
	const op = "MPI_Mprobe"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return Status{}, false, err
	}
	defer callMprobe.enter().leave()
	var mh C.tdmpi_word
	var cst C.tdmpi_status
	rc, ended := waitingUntil(done, func() C.int { return C.tdmpi_mprobe(C.int(src), C.int(tag), h, &mh, &cst) })
	if ended {
		return Status{}, true, nil
	}
	if err := newError(op, rc); err != nil {
		return Status{}, false, err
	}
	*m = Message{h: mh, bytes: cst.bytes}
	return makeStatus(&cst), false, nil
}

// recvExact matches a message from src with tag (MPI_Mprobe) and, if it
// is exactly len(buf) bytes, receives it into buf (MPI_Mrecv) in the same
// call, reporting true: a receive of known size in one call into C instead
// of two. A message of any other size is left matched in *m, unreceived,
// and recvExact reports false with its status: the caller receives or
// discards it with Mrecv. *m must not hold a message still to be received.
func recvExact(m *Message, c *Comm, buf []byte, src, tag int) (Status, bool, error) {
	st, got, _, err := recvExactUntil(m, c, buf, src, tag, nil)
	return st, got, err
}

// recvExactUntil is recvExact whose wait ends once done is closed (nil:
// it never does), with nothing matched, as mprobeUntil's does: ended is
// then true and *m is left as it was.
func recvExactUntil(m *Message, c *Comm, buf []byte, src, tag int, done <-chan struct{}) (st Status, got, ended bool, err error) {
	const op = "MPI_Mprobe"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return Status{}, false, false, err
	}
	defer callMprobe.enter().leave()
	var mh C.tdmpi_word
	var cst C.tdmpi_status
	var cgot C.int
	var p *C.tdmpi_mem
	if len(buf) > 0 {
		p = bytesMem(buf)
	}
	rc, ended := waitingUntil(done, func() C.int {
		return C.tdmpi_recv_exact(p, C.longlong(len(buf)), C.int(src), C.int(tag), h, &mh, &cgot, &cst)
	})
	switch {
	case ended:
		return Status{}, false, true, nil
	case cgot != 0:
		*m = Message{h: messageNull}
		if err := newError("MPI_Mrecv", rc); err != nil {
			return Status{}, true, false, err
		}
		return makeStatus(&cst), true, false, nil
	}
	if err := newError(op, rc); err != nil {
		return Status{}, false, false, err
	}
	*m = Message{h: mh, bytes: cst.bytes}
	return makeStatus(&cst), false, false, nil
}

// Improbe matches a message from src with tag if one has arrived, as
// MPI_Improbe. It returns (nil, false, Status{}, nil) when there is none.
func Improbe(c *Comm, src, tag int) (*Message, bool, Status, error) {
	var m Message
	ok, st, err := ImprobeInto(&m, c, src, tag)
	if err != nil || !ok {
		return nil, false, Status{}, err
	}
	return &m, true, st, nil
}

// ImprobeInto is Improbe storing a matched message in *m instead of a new
// Message (see MprobeInto); *m is left as it was when none has arrived.
func ImprobeInto(m *Message, c *Comm, src, tag int) (bool, Status, error) {
	const op = "MPI_Improbe"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return false, Status{}, err
	}
	defer callImprobe.enter().leave()
	var mh C.tdmpi_word
	var st C.tdmpi_status
	var flag C.int
	if err := newError(op, C.tdmpi_improbe(C.int(src), C.int(tag), h, &flag, &mh, &st)); err != nil {
		return false, Status{}, err
	}
	if flag == 0 {
		return false, Status{}, nil
	}
	*m = Message{h: mh, bytes: st.bytes}
	return true, makeStatus(&st), nil
}

// Mrecv receives the matched message m into buf, as MPI_Mrecv; m is
// consumed and cannot be received again. A message longer than buf (see
// Count) is received, its first len(buf) elements are stored in buf and an
// ErrTruncate error is returned; Mrecv never writes past buf.
func Mrecv[T Scalar](m *Message, buf []T) (Status, error) {
	const op = "MPI_Mrecv"
	if m == nil || m.h == messageNull {
		return Status{}, argError(op, C.MPI_ERR_REQUEST, "nil or already received message")
	}
	b := bufOf(buf)
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return Status{}, err
	}
	defer callMrecv.enter().leave()
	var st C.tdmpi_status
	h := m.h
	rc := C.tdmpi_mrecv(b.mem(), n, b.typeWord(dt), b.bytes(), m.bytes, &h, typeWords[b.k], C.longlong(b.size), &st)
	freeType(dt, derived)
	m.h = messageNull
	if err := newError(op, rc); err != nil {
		return Status{}, err
	}
	return makeStatus(&st), nil
}

// mrecvConcat receives the matched message m, of exactly len(a)+len(b)
// bytes, into a (its first len(a) bytes) and b (the rest), as Mrecv of
// their concatenation would, without a buffer that holds both: MPI writes
// the two in place, through a two-block datatype built and freed by the
// call (see sendConcat). m is consumed. A message of another size is
// refused with an ErrTruncate error (longer) or an ErrCount error
// (shorter) before anything is received, and m stays unreceived, for
// Mrecv. An empty a or b makes it Mrecv into the other; each must hold at
// most 2^31-1 bytes (ErrCount otherwise).
func mrecvConcat(m *Message, a, b []byte) (Status, error) {
	const op = "MPI_Mrecv"
	if m == nil || m.h == messageNull {
		return Status{}, argError(op, C.MPI_ERR_REQUEST, "nil or already received message")
	}
	n := int64(len(a)) + int64(len(b))
	switch {
	case int64(m.bytes) > n:
		return Status{}, argError(op, C.MPI_ERR_TRUNCATE, "message of %d bytes, buffers of %d and %d", int64(m.bytes), len(a), len(b))
	case int64(m.bytes) < n:
		return Status{}, argError(op, C.MPI_ERR_COUNT, "message of %d bytes, buffers of %d and %d: it must fill both", int64(m.bytes), len(a), len(b))
	case len(b) == 0:
		return Mrecv(m, a)
	case len(a) == 0:
		return Mrecv(m, b)
	case len(a) > math.MaxInt32 || len(b) > math.MaxInt32:
		return Status{}, argError(op, C.MPI_ERR_COUNT, "blocks of %d and %d bytes: each must be at most %d", len(a), len(b), math.MaxInt32)
	}
	defer callMrecv.enter().leave()
	var st C.tdmpi_status
	h := m.h
	rc := C.tdmpi_mrecv_pair(bytesMem(a), C.int(len(a)), bytesMem(b), C.int(len(b)), &h, &st)
	m.h = messageNull
	if err := newError(op, rc); err != nil {
		return Status{}, err
	}
	return makeStatus(&st), nil
}

// mrecvUntil receives the matched message *m into buf as Mrecv does, and
// returns once the receive has completed, or once done is closed (nil:
// never) with ended true. It starts an MPI_Imrecv and waits for it in C,
// as sendUntil waits for its send, with no Request while the receive
// completes in time. A receive given up that way is abandoned as
// Request.Abandon abandons one (see inFlightOps): MPI completes it into buf
// whenever the data comes, buf stays pinned until then, and the caller
// must not use buf. *m is received either way.
func mrecvUntil(m *Message, buf []byte, done <-chan struct{}) (st Status, ended bool, err error) {
	const op = "MPI_Imrecv"
	if m == nil || m.h == messageNull {
		return Status{}, false, argError(op, C.MPI_ERR_REQUEST, "nil or already received message")
	}
	if int64(m.bytes) > int64(len(buf)) {
		return Status{}, false, argError(op, C.MPI_ERR_TRUNCATE, "message of %d bytes, buffer of %d", int64(m.bytes), len(buf))
	}
	h, b := m.h, bufOf(buf)
	var cst C.tdmpi_status
	rc, ended, err := startUntil(op, b, false, untilPause, done, &cst, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer) C.tdmpi_started {
		return C.tdmpi_imrecv_start(b.mem(), n, dt, h)
	})
	if err != nil {
		return Status{}, false, err
	}
	m.h = messageNull
	if ended {
		return Status{}, true, nil
	}
	if rc == C.MPI_SUCCESS {
		rc = C.tdmpi_finish(C.MPI_SUCCESS, &cst, datatypes[kindOf[byte]()], 1)
	}
	if err := newError(op, rc); err != nil {
		return Status{}, false, err
	}
	return makeStatus(&cst), false, nil
}

// Imrecv starts receiving the matched message m into buf, as MPI_Imrecv,
// and returns its request (see Irecv); m is consumed. The nonblocking
// receive has no truncating form: a message longer than buf (as Improbe
// or Mprobe measured it) is refused with an ErrTruncate error before
// anything is received, and m stays unreceived, for Mrecv.
func Imrecv[T Scalar](m *Message, buf []T) (*Request, error) {
	const op = "MPI_Imrecv"
	if m == nil || m.h == messageNull {
		return nil, argError(op, C.MPI_ERR_REQUEST, "nil or already received message")
	}
	b := bufOf(buf)
	if m.bytes > b.bytes() {
		return nil, argError(op, C.MPI_ERR_TRUNCATE, "message of %d bytes, buffer of %d", int64(m.bytes), int64(b.bytes()))
	}
	h := m.h
	r, err := istart(op, b, false, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer, q *C.MPI_Request) C.int {
		return C.tdmpi_imrecv(b.mem(), n, dt, &h, q)
	})
	if err == nil {
		m.h = messageNull
	}
	return r, err
}
