// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpix

import (
	"reflect"
	"time"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/mpix/hook"
	"github.com/tdmpi/tdmpi/mpi"
)

// The functions of package mpi, typed (see the package documentation).
var (
	afterInFlight   = hook.AfterInFlight.(func(func()))
	inFlight        = hook.InFlight.(func() int)
	waitCopies      = hook.WaitCopies.(func(time.Duration) (int, error))
	yield           = hook.Yield.(func() bool)
	sendCopy        = hook.SendCopy.(func(*mpi.Comm, []byte, int, int) (bool, error))
	sendConcat      = hook.SendConcat.(func(*mpi.Comm, []byte, []byte, int, int) error)
	sendBlocksUntil = hook.SendBlocksUntil.(func(*mpi.Comm, [][]byte, int, int, <-chan struct{}) (bool, error))
	sendUntil       = hook.SendUntil.(func(*mpi.Comm, []byte, int, int, <-chan struct{}) (bool, error))
	mprobeUntil     = hook.MprobeUntil.(func(mpi.Message, *mpi.Comm, int, int, <-chan struct{}) (mpi.Message, mpi.Status, bool, error))
	mrecvUntil      = hook.MrecvUntil.(func(mpi.Message, []byte, <-chan struct{}) (mpi.Message, mpi.Status, bool, error))
	mrecvConcat     = hook.MrecvConcat.(func(mpi.Message, []byte, []byte) (mpi.Message, mpi.Status, error))
	recvExactUntil  = hook.RecvExactUntil.(func(mpi.Message, *mpi.Comm, []byte, int, int, <-chan struct{}) (mpi.Message, mpi.Status, bool, bool, error))
	ibcastUntil     = hook.IbcastUntil.(func(*mpi.Comm, []byte, reflect.Type, int, <-chan struct{}) (bool, error))
	iallreduceUntil = hook.IallreduceUntil.(func(*mpi.Comm, []byte, reflect.Type, mpi.Op, <-chan struct{}) (bool, error))
)

// CopySendMax is the largest message SendCopy sends from a copy.
const CopySendMax = hook.CopySendMax

// AfterInFlight runs f once every nonblocking operation in flight when it
// is called, dropped and abandoned ones included (see InFlight), has
// completed: at once, on the calling goroutine, when there is none;
// otherwise on the goroutine whose call completes the last of them. f must
// be quick and must not call into MPI. A caller that gave up operations on
// memory it owns (Request.Abandon, or a SendUntil or MrecvUntil that
// ended) frees that memory through AfterInFlight, so that MPI never reads
// or writes it once freed.
func AfterInFlight(f func()) { afterInFlight(f) }

// InFlight returns the number of nonblocking operations started and not
// yet complete, including those whose Request was dropped or abandoned,
// after releasing the dropped ones MPI has completed since.
func InFlight() int { return inFlight() }

// WaitCopies waits up to d for the sends of copies (SendCopy) in flight
// to complete, and returns how many have not; d <= 0 only tests them. err
// is the error of one that completed in error, not reported before.
// mpi.Finalize waits for them however long it takes.
func WaitCopies(d time.Duration) (n int, err error) { return waitCopies(d) }

// Yield lets the Go scheduler run other goroutines on the caller's
// processor (runtime.Gosched), as package mpi's blocking waits do every
// 10 us they poll, and reports whether it did: not when the calling
// goroutine is locked to its thread. A loop that polls MPI (Request.Await,
// Iprobe) calls it between polls.
func Yield() bool { return yield() }

// SendCopy sends the bytes of buf to rank dest of c with tag, as mpi.Send
// does, from a copy in C memory: it returns once MPI has started the send,
// without waiting for the receiver, and buf may be reused at once. MPI
// orders the message with the others from this process to dest on c and
// tag, as any send. sent is false, with a nil error, when nothing was
// sent (buf longer than CopySendMax, too many copies in flight, no C
// memory): the caller then sends otherwise. The sends complete in later
// calls of SendCopy, in WaitCopies or in mpi.Finalize; an error of one is
// returned, joined, by the call that sees it.
func SendCopy(c *mpi.Comm, buf []byte, dest, tag int) (sent bool, err error) {
	return sendCopy(c, buf, dest, tag)
}

// SendConcat sends the bytes of a followed by those of b to rank dest of
// c as one message, as mpi.Send of their concatenation would, without
// building it: MPI reads the two buffers in place. Each must hold at most
// 2^31-1 bytes (mpi.ErrCount otherwise).
func SendConcat(c *mpi.Comm, a, b []byte, dest, tag int) error {
	return sendConcat(c, a, b, dest, tag)
}

// SendUntil sends the bytes of buf to rank dest of c with tag, as mpi.Send
// does, and returns once the send has completed, or once done is closed
// (nil: never) with ended true. A send given up that way is abandoned as
// Request.Abandon abandons one: MPI completes it whenever the receiver
// takes it, buf stays pinned until then, and the caller must not change
// buf (see AfterInFlight). It keeps no Request while the send completes
// in time: no allocation.
func SendUntil(c *mpi.Comm, buf []byte, dest, tag int, done <-chan struct{}) (ended bool, err error) {
	return sendUntil(c, buf, dest, tag, done)
}

// SendBlocksUntil sends the bytes of blocks, one after the other, to rank
// dest of c as one message, as mpi.Send of their concatenation would,
// reading each where it lies (an hindexed datatype built for the send),
// and returns once the send has completed, or once done is closed with
// ended true: the send is then abandoned, the blocks pinned until it
// completes, and the caller must change none of them. Empty blocks are
// left out; the message holds at most 2^31-1 bytes.
func SendBlocksUntil(c *mpi.Comm, blocks [][]byte, dest, tag int, done <-chan struct{}) (ended bool, err error) {
	return sendBlocksUntil(c, blocks, dest, tag, done)
}

// MprobeUntil is mpi.MprobeInto whose wait ends once done is closed (nil:
// it never does), with nothing matched: ended is then true and *m is left
// as it was. The wait ends within about a millisecond of done's closing.
func MprobeUntil(m *mpi.Message, c *mpi.Comm, src, tag int, done <-chan struct{}) (st mpi.Status, ended bool, err error) {
	*m, st, ended, err = mprobeUntil(*m, c, src, tag, done)
	return st, ended, err
}

// MrecvUntil receives the matched message *m into buf as mpi.Mrecv does,
// and returns once the receive has completed, or once done is closed (nil:
// never) with ended true. A receive given up that way is abandoned, as
// SendUntil's send is: MPI completes it into buf whenever the data comes,
// and the caller must not use buf (see AfterInFlight). *m is received
// either way.
func MrecvUntil(m *mpi.Message, buf []byte, done <-chan struct{}) (st mpi.Status, ended bool, err error) {
	if m == nil {
		return nilMessage()
	}
	*m, st, ended, err = mrecvUntil(*m, buf, done)
	return st, ended, err
}

// MrecvConcat receives the matched message m, of exactly len(a)+len(b)
// bytes, into a (its first len(a) bytes) and b (the rest), as mpi.Mrecv
// of their concatenation would, without a buffer that holds both. m is
// consumed. A message of another size is refused with an mpi.ErrTruncate
// error (longer) or an mpi.ErrCount error (shorter) before anything is
// received, and m stays unreceived, for mpi.Mrecv.
func MrecvConcat(m *mpi.Message, a, b []byte) (st mpi.Status, err error) {
	if m == nil {
		st, _, err = nilMessage()
		return st, err
	}
	*m, st, err = mrecvConcat(*m, a, b)
	return st, err
}

// RecvExact matches a message from src with tag and, if it is exactly
// len(buf) bytes, receives it into buf in the same call, reporting true:
// a receive of known size in one call into C instead of two. A message of
// any other size is left matched in *m, unreceived, and RecvExact reports
// false with its status: the caller receives or discards it with
// mpi.Mrecv. *m must not hold a message still to be received.
func RecvExact(m *mpi.Message, c *mpi.Comm, buf []byte, src, tag int) (st mpi.Status, got bool, err error) {
	*m, st, got, _, err = recvExactUntil(*m, c, buf, src, tag, nil)
	return st, got, err
}

// RecvExactUntil is RecvExact whose wait ends once done is closed (nil: it
// never does), with nothing matched, as MprobeUntil's does: ended is then
// true and *m is left as it was.
func RecvExactUntil(m *mpi.Message, c *mpi.Comm, buf []byte, src, tag int, done <-chan struct{}) (st mpi.Status, got, ended bool, err error) {
	*m, st, got, ended, err = recvExactUntil(*m, c, buf, src, tag, done)
	return st, got, ended, err
}

// IbcastUntil is mpi.Ibcast and a wait for it in one call, which matches
// the other processes' Ibcast (MPI does not match a nonblocking collective
// with a blocking one) and keeps no Request. The wait ends once done is
// closed (nil: it never does): ended is then true, and the broadcast,
// still under way, is abandoned with buf as a dropped Request is. The
// caller must not use the communicator's collectives again, since MPI
// pairs them by order.
func IbcastUntil[T mpi.Scalar](c *mpi.Comm, buf []T, root int, done <-chan struct{}) (ended bool, err error) {
	return ibcastUntil(c, bytesOf(buf), reflect.TypeFor[T](), root, done)
}

// IallreduceInPlaceUntil is mpi.IallreduceInPlace and a wait for it in
// one call, as IbcastUntil is for Ibcast: ended is true, and the reduction
// abandoned with buf, once done is closed. Beyond 2^30 elements the wait
// cannot end early.
func IallreduceInPlaceUntil[T mpi.Scalar](c *mpi.Comm, buf []T, op mpi.Op, done <-chan struct{}) (ended bool, err error) {
	return iallreduceUntil(c, bytesOf(buf), reflect.TypeFor[T](), op, done)
}

// bytesOf returns the bytes of s's elements.
func bytesOf[T mpi.Scalar](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s))*unsafe.Sizeof(z))
}

// nilMessage returns mpi.Mrecv's error for a nil Message.
func nilMessage() (mpi.Status, bool, error) {
	st, err := mpi.Mrecv[byte](nil, nil)
	return st, false, err
}
