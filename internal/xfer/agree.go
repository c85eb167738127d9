// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"cmp"
	"fmt"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// ordered is the MPI element types that MIN and MAX can combine.
type ordered interface {
	mpi.Scalar
	cmp.Ordered
}

// AgreeTag is the tag of the messages of Combine on a group's library
// communicator: one of the group's reserved header tags (see InitHeaderTag).
const AgreeTag = proto.HeaderTag + 2

// Combine combines v, a few values, across the ranks of s's group with op,
// mpi.OpMin or mpi.OpMax, in place: the small allreduce of a collective's
// agreement steps. It exchanges point-to-point messages on AgreeTag, in
// ceil(log2 n) rounds for n ranks: in round k each rank sends what it has
// to the rank 2^k above it and combines what the rank 2^k below it sends
// (modulo n), which gives every rank the combination of all once 2^k
// reaches n, since MIN and MAX may count a rank twice. Between two ranks
// that is one message each way, which costs a third to a half of a
// nonblocking MPI_Iallreduce here (Open MPI's libnbc: 1.33-1.50 us against
// 0.52-0.64 in C, np 2), and the steps before a collective's first
// agreement must be nonblocking (see the top of step.go).
//
// Each pair of ranks exchanges at most one message per round and one per
// call, in the same order on both, so that MPI's ordering pairs the
// messages of one call with each other. Without a context, each round is
// a send and a receive that ends when a rank leaves the group (sendRecv). A message of the wrong size comes
// from a rank out of step, and breaks the group as a failed step does. With
// a context that can end, the messages are nonblocking and waited on as
// any step (Step.Wait). Every rank of a collective must combine the
// same values with Combine at the same step, whatever its own mode (an
// IAllReduce on one rank, AllReduce on the others): it serves the steps
// before the ranks agree on the mode. A step after them (closeCollective)
// uses the mode's allreduce, which the ranks that defer their steps
// queue.
func Combine[T ordered](s Step, v []T, op mpi.Op) error {
	if op != mpi.OpMin && op != mpi.OpMax {
		return fmt.Errorf("xfer: Combine with %v, not MIN or MAX (a bug)", op)
	}
	if s.Deferred != nil {
		// Its result is needed at once: an agreement is never deferred.
		return fmt.Errorf("xfer: Combine in deferred steps (a bug)")
	}
	n, me := s.Comm.Size(), s.Comm.Rank()
	b := make([]T, 2*len(v))
	out, got := b[:len(v)], b[len(v):]
	for d := 1; d < n; d *= 2 {
		copy(out, v)
		if err := exchange(s, out, (me+d)%n, got, (me-d+n)%n); err != nil {
			return err
		}
		for i, x := range got {
			if op == mpi.OpMin {
				v[i] = min(v[i], x)
			} else {
				v[i] = max(v[i], x)
			}
		}
	}
	return nil
}

// Fold combines buf across the ranks of s's group with combine, in place
// of an allreduce, through Combine's point-to-point messages (AgreeTag),
// by recursive doubling: in each round a rank exchanges what it has with
// the rank whose number differs in one bit, and both compute
// combine(lo, hi), lo being the lower rank's, which writes the combination
// into hi; so every rank gets the same bytes, whatever combine's order
// does to them. With a group size that is not a power of two, the ranks
// past the largest power first hand theirs to a rank below it and get the
// result back from it. spare is a buffer of buf's length; Fold returns
// the one that holds the result. buf must be small enough for MPI to send
// it eagerly (mpix.CopySendMax), as an agreement is: the ranks send before
// they receive.
func Fold(s Step, buf, spare []byte, combine func(lo, hi []byte)) ([]byte, error) {
	if s.Deferred != nil || len(spare) != len(buf) || len(buf) > mpix.CopySendMax {
		return nil, fmt.Errorf("xfer: Fold of %d bytes with %d spare, deferred %v (a bug)", len(buf), len(spare), s.Deferred != nil)
	}
	n, me := s.Comm.Size(), s.Comm.Rank()
	p := 1
	for p*2 <= n {
		p *= 2
	}
	// round exchanges with rank r, and combines unless keep is false.
	round := func(r int, keep bool) error {
		if err := exchange(s, buf, r, spare, r); err != nil {
			return err
		}
		switch {
		case !keep:
		case me < r:
			combine(buf, spare)
			buf, spare = spare, buf
		default:
			combine(spare, buf)
		}
		return nil
	}
	if me >= p { // hand buf to me-p, then take the result from it
		if err := round(me-p, false); err != nil {
			return nil, err
		}
		err := round(me-p, false)
		buf, spare = spare, buf
		return buf, err
	}
	extra := me+p < n
	if extra {
		if err := round(me+p, true); err != nil {
			return nil, err
		}
	}
	for d := 1; d < p; d *= 2 {
		if err := round(me^d, true); err != nil {
			return nil, err
		}
	}
	if extra {
		if err := round(me+p, false); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// exchange sends out to rank to and receives got, of the same length,
// from rank from, on AgreeTag: one round of Combine.
func exchange[T ordered](s Step, out []T, to int, got []T, from int) error {
	var st mpi.Status
	if s.Ctx.Done() == nil {
		var err error
		if st, err = sendRecv(s, out, to, got, from); err != nil {
			return err
		}
	} else {
		rr, err := mpi.Irecv(s.Comm, got, from, AgreeTag)
		if err != nil {
			return s.failed(err)
		}
		sr, err := mpi.Isend(s.Comm, out, to, AgreeTag)
		if err != nil {
			rr.Abandon()
			return s.failed(err)
		}
		if err := s.Wait(rr, nil); err != nil {
			sr.Abandon()
			return err
		}
		if err := s.Wait(sr, nil); err != nil {
			return err
		}
		if st, err = rr.Wait(); err != nil { // completed: only its status
			return s.failed(err)
		}
	}
	if c := mpi.Count[T](st); c != len(got) {
		cause := fmt.Errorf("rank %d sent an agreement of %d values, want %d: %w", from, c, len(got), ErrOutOfStep)
		return s.breakGroup(cause)
	}
	return nil
}

// sendRecv is exchange without a context: it sends out (a few bytes,
// which MPI sends eagerly: the send returns at once) and receives got,
// until a rank leaves the group (proto.Departed), as a step does. A
// message of another size is discarded; its status says its size.
func sendRecv[T ordered](s Step, out []T, to int, got []T, from int) (mpi.Status, error) {
	if err := mpi.Send(s.Comm, out, to, AgreeTag); err != nil {
		return mpi.Status{}, s.failed(err)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(got))), len(got)*int(unsafe.Sizeof(got[0])))
	var m mpi.Message
	st, ok, ended, err := mpix.RecvExactUntil(&m, s.Comm, b, from, AgreeTag, proto.Departed(s.Group))
	switch {
	case ended:
		return st, s.departed()
	case err != nil:
		return st, s.failed(err)
	case !ok:
		return st, s.failed(Discard(&m, st.Bytes(), nil))
	}
	return st, nil
}
