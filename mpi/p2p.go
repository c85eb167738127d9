// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
// #cgo nocallback tdmpi_isend_start
// #cgo nocallback tdmpi_isend_pair_start
// #cgo noescape tdmpi_send
// #cgo nocallback tdmpi_send
// #cgo noescape tdmpi_send_two_copy
// #cgo nocallback tdmpi_send_two_copy
// #cgo noescape tdmpi_send_bytes
// #cgo nocallback tdmpi_send_bytes
// #cgo noescape tdmpi_recv
// #cgo nocallback tdmpi_recv
// #cgo noescape tdmpi_sendrecv
// #cgo nocallback tdmpi_sendrecv
// #cgo noescape tdmpi_probe
// #cgo nocallback tdmpi_probe
// #cgo noescape tdmpi_iprobe
// #cgo nocallback tdmpi_iprobe
import "C"

import (
	"math"
	"runtime"
	"unsafe"
)

// checkDest validates a destination rank of c.
func (c *Comm) checkDest(op string, dest int) error {
	if dest == ProcNull {
		return nil
	}
	if dest < 0 || dest >= c.size {
		return argError(op, C.MPI_ERR_RANK, "destination rank %d out of range [0, %d)", dest, c.size)
	}
	return nil
}

// checkSource validates a source rank of c, which may be AnySource.
func (c *Comm) checkSource(op string, src int) error {
	if src == ProcNull || src == AnySource {
		return nil
	}
	if src < 0 || src >= c.size {
		return argError(op, C.MPI_ERR_RANK, "source rank %d out of range [0, %d)", src, c.size)
	}
	return nil
}

// checkTag validates a tag; AnyTag is allowed when any is true.
func (c *Comm) checkTag(op string, tag int, any bool) error {
	if any && tag == AnyTag {
		return nil
	}
	if tag < 0 || tag > c.tagUB {
		return argError(op, C.MPI_ERR_TAG, "tag %d out of range [0, %d]", tag, c.tagUB)
	}
	return nil
}

// sendArgs checks c, dest and tag for a send, and returns c's handle as a
// word (see tdmpi_word in shim.h); c.h is then valid too.
func (c *Comm) sendArgs(op string, dest, tag int) (C.tdmpi_word, error) {
	if _, err := c.handle(op); err != nil {
		return 0, err
	}
	if err := c.checkDest(op, dest); err != nil {
		return 0, err
	}
	return c.w, c.checkTag(op, tag, false)
}

// recvArgs is sendArgs for a receive or a probe from src.
func (c *Comm) recvArgs(op string, src, tag int) (C.tdmpi_word, error) {
	if _, err := c.handle(op); err != nil {
		return 0, err
	}
	if err := c.checkSource(op, src); err != nil {
		return 0, err
	}
	return c.w, c.checkTag(op, tag, true)
}

// Send sends buf to rank dest of c with the given tag, as MPI_Send. It
// returns when buf may be reused. Any length works: beyond 2^31-1 elements
// the message is still one message, described by a derived datatype.
func Send[T Scalar](c *Comm, buf []T, dest, tag int) error {
	const op = "MPI_Send"
	h, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return err
	}
	b := bufOf(buf)
	if twoCopy(b) {
		defer callSend.enter().leave()
		return newError(op, C.tdmpi_send_two_copy(b.mem(), C.int(b.n), C.int(b.size), typeWords[b.k], C.int(dest), C.int(tag), h))
	}
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return err
	}
	defer callSend.enter().leave()
	err = newError(op, C.tdmpi_send(b.mem(), n, b.typeWord(dt), C.int(dest), C.int(tag), h))
	freeType(dt, derived)
	return err
}

// sendConcat sends the bytes of a followed by those of b to rank dest of
// c as one message, as Send of their concatenation would, without building
// it: the receiver cannot tell the difference. MPI reads the two buffers
// in place, through a two-block datatype built and freed by the call
// (about 0.1 us). An empty a or b makes it Send of the other. Each must
// hold at most 2^31-1 bytes (ErrCount otherwise).
//
// A message in two blocks also moves differently: Open MPI's
// shared-memory transport copies a buffer that is not contiguous through
// shared-memory fragments, where it moves a contiguous one above its eager
// limit with a single copy through the kernel (see SetTwoCopySends).
func sendConcat(c *Comm, a, b []byte, dest, tag int) error {
	const op = "MPI_Send"
	if len(b) == 0 {
		return Send(c, a, dest, tag)
	}
	if len(a) == 0 {
		return Send(c, b, dest, tag)
	}
	h, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return err
	}
	if len(a) > math.MaxInt32 || len(b) > math.MaxInt32 {
		return argError(op, C.MPI_ERR_COUNT, "blocks of %d and %d bytes: each must be at most %d", len(a), len(b), math.MaxInt32)
	}
	defer callSend.enter().leave()
	return newError(op, C.tdmpi_send_bytes(bytesMem(a), C.int(len(a)), bytesMem(b), C.int(len(b)), C.int(dest), C.int(tag), h))
}

// Recv receives a message from rank src (or AnySource) of c with the given
// tag (or AnyTag) into buf, as MPI_Recv. The message may be shorter than
// buf. A longer one is received, its first len(buf) elements are stored in
// buf and an ErrTruncate error is returned; Recv never writes past buf (it
// matches the message with MPI_Mprobe first and checks its size). The
// Status tells the sender, the tag and the size.
func Recv[T Scalar](c *Comm, buf []T, src, tag int) (Status, error) {
	const op = "MPI_Recv"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return Status{}, err
	}
	b := bufOf(buf)
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return Status{}, err
	}
	dtw := b.typeWord(dt)
	defer callRecv.enter().leave()
	var st C.tdmpi_status
	err = newError(op, waiting(func() C.int {
		return C.tdmpi_recv(b.mem(), n, dtw, b.bytes(), C.int(src), C.int(tag), h, typeWords[b.k], C.longlong(b.size), &st)
	}))
	freeType(dt, derived)
	if err != nil {
		return Status{}, err
	}
	return makeStatus(&st), nil
}

// Sendrecv sends send to dest and receives into recv from src in one call,
// as MPI_Sendrecv; it cannot deadlock against a matching Sendrecv. The
// buffers must not overlap. The receive is checked as in Recv, and waits
// as Recv does (SetSpinWait), except that it lets the Go scheduler run
// only once MPI is done with send: a send past the eager limit keeps the
// call in C until the peer has matched it, as Send does.
func Sendrecv[T Scalar](c *Comm, send []T, dest, sendTag int, recv []T, src, recvTag int) (Status, error) {
	const op = "MPI_Sendrecv"
	h, err := c.sendArgs(op, dest, sendTag)
	if err != nil {
		return Status{}, err
	}
	if _, err := c.recvArgs(op, src, recvTag); err != nil {
		return Status{}, err
	}
	sb, rb := bufOf(send), bufOf(recv)
	sdt, sn, sderived, err := sb.dtype(op)
	if err != nil {
		return Status{}, err
	}
	defer freeType(sdt, sderived)
	rdt, rn, rderived, err := rb.dtype(op)
	if err != nil {
		return Status{}, err
	}
	defer freeType(rdt, rderived)
	sdtw, rdtw := sb.typeWord(sdt), rb.typeWord(rdt)
	defer callSendrecv.enter().leave()
	var st C.tdmpi_status
	if err := newError(op, waiting(func() C.int {
		return C.tdmpi_sendrecv(sb.mem(), sn, sdtw, C.int(dest), C.int(sendTag),
			rb.mem(), rn, rdtw, rb.bytes(), C.int(src), C.int(recvTag), h, typeWords[rb.k], C.longlong(rb.size), &st)
	})); err != nil {
		return Status{}, err
	}
	return makeStatus(&st), nil
}

// Probe blocks until a message from src with tag can be received, and
// returns its status without receiving it, as MPI_Probe. With several
// goroutines receiving on c, a later Recv may match another message: use
// Mprobe and Mrecv instead.
func Probe(c *Comm, src, tag int) (Status, error) {
	const op = "MPI_Probe"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return Status{}, err
	}
	defer callProbe.enter().leave()
	var st C.tdmpi_status
	if err := newError(op, waiting(func() C.int { return C.tdmpi_probe(C.int(src), C.int(tag), h, &st) })); err != nil {
		return Status{}, err
	}
	return makeStatus(&st), nil
}

// Iprobe reports whether a message from src with tag can be received now,
// and its status if so, as MPI_Iprobe.
func Iprobe(c *Comm, src, tag int) (bool, Status, error) {
	const op = "MPI_Iprobe"
	h, err := c.recvArgs(op, src, tag)
	if err != nil {
		return false, Status{}, err
	}
	defer callIprobe.enter().leave()
	var st C.tdmpi_status
	var flag C.int
	if err := newError(op, C.tdmpi_iprobe(C.int(src), C.int(tag), h, &flag, &st)); err != nil {
		return false, Status{}, err
	}
	if flag == 0 {
		return false, Status{}, nil
	}
	return true, makeStatus(&st), nil
}

// sendUntil sends the bytes of buf to rank dest of c with tag, as Send
// does, and returns once the send has completed, or once done is closed
// (nil: never) with ended true. It starts an MPI_Isend and waits for it
// in C, in slices between which it checks done, as Request.Await would,
// with no Request while the send completes in time: no allocation,
// finalizer or registration. A send given up that way is abandoned as
// Request.Abandon abandons one (see inFlightOps): MPI completes it whenever
// the receiver takes it, buf stays pinned until then, and the caller must
// not change buf.
func sendUntil(c *Comm, buf []byte, dest, tag int, done <-chan struct{}) (ended bool, err error) {
	const op = "MPI_Isend"
	w, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return false, err
	}
	b := bufOf(buf)
	var cst C.tdmpi_status
	rc, ended, err := startUntil(op, b, false, untilPause, done, &cst, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer) C.tdmpi_started {
		return C.tdmpi_isend_start(b.mem(), n, dt, C.int(dest), C.int(tag), w)
	})
	if err != nil || ended {
		return ended, err
	}
	return false, newError(op, rc)
}

// sendBlocksUntil sends the bytes of blocks, one after the other, to rank
// dest of c as one message, as Send of their concatenation would, without
// building it: MPI reads each block where it lies, through a datatype of
// as many blocks built for the send. It returns once the send has
// completed, or once done is closed (nil: never) with ended true; the send
// is then abandoned, the blocks pinned until it completes, and the caller
// must change none of them. Empty blocks are left out; the message must
// hold at most 2^31-1 bytes (ErrCount otherwise).
func sendBlocksUntil(c *Comm, blocks [][]byte, dest, tag int, done <-chan struct{}) (ended bool, err error) {
	const op = "MPI_Isend"
	var two [2][]byte
	n, total := 0, 0
	for _, b := range blocks {
		if len(b) > 0 {
			if n < 2 {
				two[n] = b
			}
			n, total = n+1, total+len(b)
		}
	}
	if total > math.MaxInt32 {
		return false, argError(op, C.MPI_ERR_COUNT, "blocks of %d bytes in all: at most %d", total, math.MaxInt32)
	}
	if n <= 2 {
		return sendConcatUntil(c, two[0], two[1], dest, tag, done)
	}
	w, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return false, err
	}
	lens := make([]C.int, 0, n)
	addrs := make([]C.MPI_Aint, 0, n) // no Go pointer: MPI copies them into the type
	ptrs := make([]unsafe.Pointer, 0, n)
	var pin runtime.Pinner // MPI reads the blocks between the slices of the wait
	defer pin.Unpin()
	for _, b := range blocks {
		if len(b) > 0 {
			p := unsafe.Pointer(unsafe.SliceData(b))
			pin.Pin(p)
			lens, addrs, ptrs = append(lens, C.int(len(b))), append(addrs, C.MPI_Aint(uintptr(p))), append(ptrs, p)
		}
	}
	defer callWait.enter().leave()
	s := C.tdmpi_isend_blocks_start(C.int(n), &lens[0], &addrs[0], C.int(dest), C.int(tag), w)
	if err := newError(op, s.rc); err != nil {
		return false, err
	}
	q := s.q
	var cst C.tdmpi_status
	// Not paused: Open MPI copies a message that is not contiguous through
	// shared-memory fragments that the sender fills as it progresses.
	rc, ended := waitingUntil(done, func() C.int { return C.tdmpi_wait_req(&q, &cst, cbool(false)) })
	if !ended {
		return false, newError(op, rc)
	}
	var flag C.int
	if rc = C.MPI_Test(&q, &flag, &cst.st); rc != C.MPI_SUCCESS || flag != 0 {
		return false, newError(op, rc) // it completed (or failed) as done closed
	}
	b := bufOf(two[0])
	f := newInflight(op, b.k, b.size, false, C.longlong(total), ptrs...) // pinned anew: the wait's own pin goes on return
	f.hs = []C.MPI_Request{q}
	register(f)
	orphan(f) // reap completes it
	return true, nil
}

// sendConcatUntil is sendConcat as sendUntil: it sends the bytes of a
// followed by those of b to rank dest of c as one message, and returns
// once the send has completed, or once done is closed (nil: never) with
// ended true; the send is then abandoned, a and b pinned until it
// completes, and the caller must change neither. Each must hold at most
// 2^31-1 bytes (ErrCount otherwise).
func sendConcatUntil(c *Comm, a, b []byte, dest, tag int, done <-chan struct{}) (ended bool, err error) {
	const op = "MPI_Isend"
	if len(b) == 0 {
		return sendUntil(c, a, dest, tag, done)
	}
	if len(a) == 0 {
		return sendUntil(c, b, dest, tag, done)
	}
	w, err := c.sendArgs(op, dest, tag)
	if err != nil {
		return false, err
	}
	if len(a) > math.MaxInt32 || len(b) > math.MaxInt32 {
		return false, argError(op, C.MPI_ERR_COUNT, "blocks of %d and %d bytes: each must be at most %d", len(a), len(b), math.MaxInt32)
	}
	var cst C.tdmpi_status
	rc, ended, err := startUntilAlso(op, bufOf(a), unsafe.Pointer(&b[0]), false, untilPause, done, &cst, func(C.MPI_Datatype, C.int, unsafe.Pointer) C.tdmpi_started {
		return C.tdmpi_isend_pair_start(bytesMem(a), C.int(len(a)), bytesMem(b), C.int(len(b)), C.int(dest), C.int(tag), w)
	})
	if err != nil || ended {
		return ended, err
	}
	return false, newError(op, rc)
}
