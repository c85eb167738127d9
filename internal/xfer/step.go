// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// The MPI collectives the library runs on a group's library communicator
// (Broadcast, AllReduce, Reduce, AllGather, Scatter, GatherAndStack and
// broadcast-mode InitRemote, their agreement steps included) can be
// bounded by the call's context: a rank whose peers never come (one rank
// alone in a collective, a peer that died or whose network failed) returns
// when its context ends. For that a step must be started in its
// nonblocking form and waited on with the context, and MPI does not pair a
// blocking collective with a nonblocking one, so every rank must use the
// same form for a step. The steps up to a collective's first agreement are
// always nonblocking; the agreement also tells the ranks whether any of
// them has a context that can end (or defers its steps, as IAllReduce
// does), and only then are the later steps nonblocking too. Otherwise they
// use MPI's blocking collectives, which Open MPI runs faster on large
// buffers (its tuned algorithms; libnbc's nonblocking schedules reduced
// 16 MiB at 0.5-0.8 of the blocking call's speed here). The torch wire
// (torch.go) always makes the blocking calls PyTorch's ranks make.
//
// A rank whose context ends still waits a grace period (StepGrace) for its
// peers, so that every rank learns of the failure at the agreement steps.
// A step cannot be cancelled: one given up stays in progress in MPI, its
// buffers pinned (mpi.Request), and breaks the group (proto.Break),
// since any later collective on it would be paired with that step.

// Step is where one collective call runs its steps: the group, its library
// communicator and the call's context, and the state the copies of one
// call's steps share.
type Step struct {
	Ctx   context.Context
	Group *group.Group
	Comm  *mpi.Comm // Group's library communicator
	// Deferred, when not nil, collects the steps: they are posted now and
	// completed later (by an asynchronous collective's Pending.Wait).
	Deferred *Deferred
	st       *stepState
}

// stepState is what one call's steps share.
type stepState struct {
	// late is when the call stops waiting, once its context has ended.
	late time.Time
	// blocking is set when the ranks agreed that none of them has a
	// context that can end: the steps after the agreement then use MPI's
	// blocking collectives, faster than the nonblocking ones for large
	// buffers (Open MPI's tuned algorithms against libnbc's schedules).
	blocking bool
}

// Blocking reports whether s's steps use the blocking collectives.
func (s Step) Blocking() bool { return s.Deferred == nil && s.st.blocking }

// Unbounded is the value a rank contributes to an agreement on the mode of
// the steps after it (see stepState.blocking): 1 if its context can never
// end, else 0. The ranks combine it with MIN (or its complement with MAX).
func (s Step) Unbounded() int32 {
	if s.Ctx.Done() == nil {
		return 1
	}
	return 0
}

// Agreed records the combined unbounded value of an agreement.
func (s Step) Agreed(unbounded int32) { s.st.blocking = unbounded == 1 }

// Deferred holds the posted steps of an asynchronous collective (IAllReduce,
// IReduce) and what must run once they complete (copying a bucket back,
// rounding half-precision results, dividing an average), in order.
type Deferred struct {
	Reqs  []*mpi.Request // the posted steps, in order
	After []func() error // what runs once they complete, in order
}

// Then runs f now, or, when s's steps are deferred, once they complete.
func (s Step) Then(f func() error) error {
	if s.Deferred != nil {
		s.Deferred.After = append(s.Deferred.After, f)
		return nil
	}
	return f()
}

// StepGrace is how long a collective call whose context has ended still
// waits for its steps: its peers are usually at the same step and complete
// it at once, so that every rank learns of the failure (the agreement
// steps) and the group stays usable. Only a step the peers do not reach
// within StepGrace is abandoned.
const StepGrace = time.Second

// NewStep returns the Step of one call on g's library communicator.
func NewStep(ctx context.Context, g *group.Group) Step {
	return Step{Ctx: ctx, Group: g, Comm: proto.LibComm(g), st: new(stepState)}
}

// Wait completes the collective step r (err is the error of starting it),
// or, when s's steps are deferred (s.Deferred), queues it and returns.
// Wait waits in slices (Request.Await), letting the Go scheduler run and
// checking the context between them, until the step completes or
// StepGrace after the context ended; a context that can never end, until
// the step completes or a rank leaves the group (proto.Departed),
// which ends it with an error wrapping group.ErrPeerLeft. A step given up is abandoned to MPI,
// the group is broken, and the error wraps the context's error and
// group.ErrBroken. A step that MPI fails breaks the group too (see failed).
func (s Step) Wait(r *mpi.Request, err error) error {
	if err != nil {
		return s.failed(err)
	}
	if s.Deferred != nil {
		s.Deferred.Reqs = append(s.Deferred.Reqs, r)
		return nil
	}
	done := s.Ctx.Done()
	if done == nil {
		left := proto.Departed(s.Group)
		for {
			ok, _, err := r.Await()
			if err != nil || ok {
				return s.failed(err)
			}
			select {
			case <-left:
				r.Abandon()
				return s.departed()
			default:
			}
			mpix.Yield()
		}
	}
	for {
		ok, _, err := r.Await()
		if err != nil || ok {
			return s.failed(err)
		}
		select {
		case <-done:
			if s.st.late.IsZero() {
				s.st.late = time.Now().Add(StepGrace)
			} else if time.Now().After(s.st.late) {
				cause := fmt.Errorf("%s given up %v after the context ended: %w", r.Op(), StepGrace, s.Ctx.Err())
				r.Abandon()
				return s.breakGroup(cause)
			}
		default:
		}
		mpix.Yield()
	}
}

// departed returns the error of a step given up, without a context, as a
// rank of s's group left it (proto.Departed): it names the rank and
// wraps group.ErrPeerLeft and group.ErrBroken.
func (s Step) departed() error {
	return proto.Broken(s.Group, "waiting for a collective step")
}

// failed returns nil for a nil err. Otherwise MPI failed a step on this
// rank (a message truncated because the ranks are not in the same
// collective, say): the ranks are out of step on the communicator, and
// another collective on it (closing this one, the next call) could be
// paired with anything, which Open MPI's nonblocking collectives do not
// survive. So failed breaks the group, and its error wraps err and
// group.ErrBroken.
func (s Step) failed(err error) error {
	if err == nil {
		return nil
	}
	cause := fmt.Errorf("a collective step failed: %w", err)
	return s.breakGroup(cause)
}

// breakGroup breaks s's group for cause (proto.Break) and returns
// the error of the step that broke it: cause, wrapping group.ErrBroken.
func (s Step) breakGroup(cause error) error {
	proto.Break(s.Group, cause)
	return fmt.Errorf("%w (%w: free the group)", cause, group.ErrBroken)
}

// Bcast broadcasts buf from root. In the nonblocking form, when this
// rank's context cannot end and the step is not deferred, it waits within
// one call (mpix.IbcastUntil, until a rank leaves the group), which matches the other ranks' Ibcast without
// a Request: a 4000-byte first message of Broadcast took 0.76-1.0 us
// against 1.12-1.45 with Ibcast and Wait (np 2, alternating roots).
func Bcast[T mpi.Scalar](s Step, buf []T, root int) error {
	switch {
	case s.Blocking():
		return s.failed(mpi.Bcast(s.Comm, buf, root))
	case s.Deferred == nil && s.Ctx.Done() == nil:
		ended, err := mpix.IbcastUntil(s.Comm, buf, root, proto.Departed(s.Group))
		if ended {
			return s.departed()
		}
		return s.failed(err)
	}
	return s.Wait(mpi.Ibcast(s.Comm, buf, root))
}

// Allreduce reduces buf in place on every rank with op. In the
// nonblocking form, when this rank's context cannot end and the step is
// not deferred, it waits within one call (mpix.IallreduceInPlaceUntil), as
// Bcast does: the closing step of a Broadcast that no agreement preceded.
func Allreduce[T mpi.Scalar](s Step, buf []T, op mpi.Op) error {
	switch {
	case s.Blocking():
		return s.failed(mpi.AllreduceInPlace(s.Comm, buf, op))
	case s.Deferred == nil && s.Ctx.Done() == nil:
		ended, err := mpix.IallreduceInPlaceUntil(s.Comm, buf, op, proto.Departed(s.Group))
		if ended {
			return s.departed()
		}
		return s.failed(err)
	}
	return s.Wait(mpi.IallreduceInPlace(s.Comm, buf, op))
}

// Reduce reduces buf in place with op into root's buf; the other ranks'
// buf is only read.
func Reduce[T mpi.Scalar](s Step, buf []T, op mpi.Op, root int) error {
	if s.Blocking() {
		return s.failed(mpi.ReduceInPlace(s.Comm, buf, op, root))
	}
	return s.Wait(mpi.IreduceInPlace(s.Comm, buf, op, root))
}

// equalCounts returns the counts of n ranks' blocks of m elements each.
func equalCounts(n, m int) []int {
	counts := make([]int, n)
	for r := range n {
		counts[r] = m
	}
	return counts
}

// Allgather gathers every rank's send, all of one length, into recv on
// every rank, in rank order. It always runs in the nonblocking form: it is
// the first step of AllGather, before the ranks agree on the mode.
func Allgather[T mpi.Scalar](s Step, send, recv []T) error {
	return s.Wait(mpi.Iallgatherv(s.Comm, send, recv, equalCounts(s.Comm.Size(), len(send)), nil))
}

// Gather gathers every rank's send, all of one length, into root's
// recv, in rank order (nonblocking, as Allgather).
func Gather[T mpi.Scalar](s Step, send, recv []T, root int) error {
	return s.Wait(mpi.Igatherv(s.Comm, send, recv, equalCounts(s.Comm.Size(), len(send)), nil, root))
}

// Scatter sends each rank its block of root's send, all blocks of
// len(recv) elements, into recv (nonblocking, as Allgather).
func Scatter[T mpi.Scalar](s Step, send, recv []T, root int) error {
	return s.Wait(mpi.Iscatterv(s.Comm, send, equalCounts(s.Comm.Size(), len(recv)), nil, recv, root))
}

// Allgatherv is the in-place MPI_Allgatherv of AllGather's blocks.
func Allgatherv[T mpi.Scalar](s Step, buf []T, counts, displs []int) error {
	if s.Blocking() {
		return s.failed(mpi.AllgathervInPlace(s.Comm, buf, counts, displs))
	}
	return s.Wait(mpi.IallgathervInPlace(s.Comm, buf, counts, displs))
}

// Gatherv is the in-place MPI_Gatherv of GatherAndStack's blocks.
func Gatherv[T mpi.Scalar](s Step, buf []T, counts, displs []int, root int) error {
	if s.Blocking() {
		return s.failed(mpi.GathervInPlace(s.Comm, buf, counts, displs, root))
	}
	return s.Wait(mpi.IgathervInPlace(s.Comm, buf, counts, displs, root))
}

// Scatterv is the in-place MPI_Scatterv of Scatter's blocks.
func Scatterv[T mpi.Scalar](s Step, buf []T, counts, displs []int, root int) error {
	if s.Blocking() {
		return s.failed(mpi.ScattervInPlace(s.Comm, buf, counts, displs, root))
	}
	return s.Wait(mpi.IscattervInPlace(s.Comm, buf, counts, displs, root))
}

// BcastChunks broadcasts b from root in pieces of at most wire.MaxChunk
// bytes. Every rank passes a b of the same length.
func (s Step) BcastChunks(b []byte, root int) error {
	for off := 0; off < len(b); off += wire.MaxChunk {
		if err := Bcast(s, b[off:min(off+wire.MaxChunk, len(b))], root); err != nil {
			return err
		}
	}
	return nil
}

// ErrOutOfStep is wrapped by the error of an agreement whose result cannot
// come from ranks in the same collective (see Step.Agree).
var ErrOutOfStep = errors.New("the ranks are not in the same collective")

// Agree is the agreement step of a collective, one small allreduce
// (Combine): every
// rank learns whether some rank failed before the payload moved, and the
// ranks settle the form of the steps after it (see Unbounded and
// Agreed). failed says whether this rank failed. Agree returns the lowest
// failing rank, or the group's size when none failed, the same on every
// rank, checked by CheckFailed.
func (s Step) Agree(failed bool) (int, error) {
	r, _, err := s.agree(failed, nil)
	return r, err
}

// AgreeMin is Agree that also combines x, this rank's value, with every
// other rank's: it returns the lowest, the same on every rank. Every rank
// of the collective must call AgreeMin at that step, not Agree (the two
// combine vectors of different lengths).
func (s Step) AgreeMin(failed bool, x int32) (int, int32, error) {
	return s.agree(failed, &x)
}

func (s Step) agree(failed bool, x *int32) (int, int32, error) {
	size := s.Comm.Size()
	v := make([]int32, 2, 3)
	v[0], v[1] = int32(size), s.Unbounded()
	if failed {
		v[0] = int32(s.Comm.Rank())
	}
	if x != nil {
		v = append(v, *x)
	}
	if err := Combine(s, v, mpi.OpMin); err != nil {
		return 0, 0, err
	}
	s.Agreed(v[1])
	r := int(v[0])
	var low int32
	if x != nil {
		low = v[2]
	}
	return r, low, s.CheckFailed(r, failed)
}

// AgreeRoot is the first step of a collective that every rank names the
// root of (Broadcast, broadcast-mode InitRemote). MPI pairs a broadcast's
// ranks by their order alone: ranks that passed different roots would
// each keep their own buffer as the result, or wait for each other, and
// leave the roots' messages queued for a later collective. So the ranks
// combine their roots before any of them posts a message of the
// collective: AgreeRoot returns the lowest and the highest root passed,
// and the highest rank that cannot take part (failed), or -1 for none,
// the same on every rank.
func (s Step) AgreeRoot(root int, failed bool) (lo, hi, fail int, err error) {
	f := int64(-1)
	if failed {
		f = int64(s.Comm.Rank())
	}
	// The maximum of a root and of its complement: the complement of the
	// lowest root.
	v := []int64{int64(root), ^int64(root), f}
	if err := Combine(s, v, mpi.OpMax); err != nil {
		return 0, 0, 0, err
	}
	return int(^v[1]), int(v[0]), int(v[2]), nil
}

// AgreeRootMode is AgreeRoot and Agree in one step: the ranks compare
// their roots, learn the lowest failing rank (fail, -1 for none, as Agree
// gives it), and agree on the mode of the steps after it. It is the step
// of a broadcast that compares the roots after its first message (see
// tensordict's steady broadcasts); every rank of the collective must call
// it at that step.
func (s Step) AgreeRootMode(root int, failed bool) (lo, hi, fail int, err error) {
	size := s.Comm.Size()
	f := int64(0) // size minus the failing rank: the lowest wins MAX
	if failed {
		f = int64(size - s.Comm.Rank())
	}
	v := []int64{int64(root), ^int64(root), f, int64(1 - s.Unbounded())}
	if err := Combine(s, v, mpi.OpMax); err != nil {
		return 0, 0, 0, err
	}
	s.Agreed(int32(1 - v[3]))
	fail = -1
	if v[2] != 0 {
		fail = size - int(v[2])
	}
	return int(^v[1]), int(v[0]), fail, nil
}

// CheckFailed checks r, the failing rank that a combination across the
// ranks named (size for none), against what this rank knows: failed says
// whether it failed itself. A rank below zero or above the group's size,
// or this rank while it did not fail, cannot come from ranks in the same
// collective: MPI paired this rank's step with another kind of step on
// some rank (AllReduce on one rank, Broadcast on another). CheckFailed
// then breaks the group, rather than go on with steps nobody matches, and
// returns an error wrapping ErrOutOfStep and group.ErrBroken.
func (s Step) CheckFailed(r int, failed bool) error {
	size, me := s.Comm.Size(), s.Comm.Rank()
	if r >= 0 && r <= size && (r != me || failed) {
		return nil
	}
	cause := fmt.Errorf("the agreement names rank %d of %d as failed, which cannot be: %w", r, size, ErrOutOfStep)
	return s.breakGroup(cause)
}
