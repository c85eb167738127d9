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
