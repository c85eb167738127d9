// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/tdmpi/tdmpi/group"
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
// A rank whose context ends still waits a grace period (stepGrace) for its
// peers, so that every rank learns of the failure at the agreement steps.
// A step cannot be cancelled: one given up stays in progress in MPI, its
// buffers pinned (mpi.Request), and breaks the group (group.Group.Break),
// since any later collective on it would be paired with that step.

// step is where one collective call runs its steps: the group, its library
// communicator and the call's context, and the state the copies of one
// call's step share.
type step struct {
	ctx context.Context
	g   *group.Group
	c   *mpi.Comm
	st  *stepState
	q   *deferredSteps // not nil: steps are posted now and completed by Pending.Wait
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

// blocking reports whether s's steps use the blocking collectives.
func (s step) blocking() bool { return s.q == nil && s.st.blocking }

// unbounded is the value a rank contributes to an agreement on the mode of
// the steps after it (see stepState.blocking): 1 if its context can never
// end, else 0. The ranks combine it with MIN (or its complement with MAX).
func (s step) unbounded() int32 {
	if s.ctx.Done() == nil {
		return 1
	}
	return 0
}

// agreed records the combined unbounded value of an agreement.
func (s step) agreed(unbounded int32) { s.st.blocking = unbounded == 1 }

// deferredSteps holds the posted steps of an asynchronous collective (IAllReduce,
// IReduce) and what must run once they complete (copying a bucket back,
// rounding half-precision results, dividing an average), in order.
type deferredSteps struct {
	reqs  []*mpi.Request
	after []func() error
}

// then runs f now, or, when s's steps are deferred, once they complete.
func (s step) then(f func() error) error {
	if s.q != nil {
		s.q.after = append(s.q.after, f)
		return nil
	}
	return f()
}

// stepGrace is how long a collective call whose context has ended still
// waits for its steps: its peers are usually at the same step and complete
// it at once, so that every rank learns of the failure (the agreement
// steps) and the group stays usable. Only a step the peers do not reach
// within stepGrace is abandoned.
const stepGrace = time.Second

// newStep returns the step of one call on g's library communicator.
func newCollStep(ctx context.Context, g *group.Group) step {
	return step{ctx: ctx, g: g, c: g.LibComm(), st: new(stepState)}
}

// wait completes the collective step r (err is the error of starting it),
// or, when s's steps are deferred (s.q), queues it and returns.
// A context that can never end waits in MPI_Wait; otherwise wait spins on
// MPI_Test, as a blocking MPI call spins on its progress engine, yielding
// the processor between tests, until the step completes or stepGrace after
// the context ended. A step given up is abandoned to MPI, the group is
// broken, and the error wraps the context's error and group.ErrBroken.
func (s step) wait(r *mpi.Request, err error) error {
	if err != nil {
		return err
	}
	if s.q != nil {
		s.q.reqs = append(s.q.reqs, r)
		return nil
	}
	done := s.ctx.Done()
	if done == nil {
		_, err := r.Wait()
		return err
	}
	for i := 0; ; i++ {
		ok, _, err := r.Test()
		if err != nil || ok {
			return err
		}
		if i%64 == 0 {
			select {
			case <-done:
				if s.st.late.IsZero() {
					s.st.late = time.Now().Add(stepGrace)
				} else if time.Now().After(s.st.late) {
					cause := fmt.Errorf("%s given up %v after the context ended: %w", r.Op(), stepGrace, s.ctx.Err())
					r.Abandon()
					s.g.Break(cause)
					return fmt.Errorf("%w (%w: free the group)", cause, group.ErrBroken)
				}
			default:
			}
		}
		runtime.Gosched()
	}
}

// bcastStep broadcasts buf from root.
func bcastStep[T mpi.Scalar](s step, buf []T, root int) error {
	if s.blocking() {
		return mpi.Bcast(s.c, buf, root)
	}
	return s.wait(mpi.Ibcast(s.c, buf, root))
}

// allreduceStep reduces buf in place on every rank with op.
func allreduceStep[T mpi.Scalar](s step, buf []T, op mpi.Op) error {
	if s.blocking() {
		return mpi.AllreduceInPlace(s.c, buf, op)
	}
	return s.wait(mpi.IallreduceInPlace(s.c, buf, op))
}

// reduceStep reduces buf in place with op into root's buf; the other ranks'
// buf is only read.
func reduceStep[T mpi.Scalar](s step, buf []T, op mpi.Op, root int) error {
	if s.blocking() {
		return mpi.ReduceInPlace(s.c, buf, op, root)
	}
	return s.wait(mpi.IreduceInPlace(s.c, buf, op, root))
}

// equalCounts returns the counts of n ranks' blocks of m elements each.
func equalCounts(n, m int) []int {
	counts := make([]int, n)
	for r := range n {
		counts[r] = m
	}
	return counts
}

// allgatherStep gathers every rank's send, all of one length, into recv on
// every rank, in rank order. It always runs in the nonblocking form: it is
// the first step of AllGather, before the ranks agree on the mode.
func allgatherStep[T mpi.Scalar](s step, send, recv []T) error {
	return s.wait(mpi.Iallgatherv(s.c, send, recv, equalCounts(s.c.Size(), len(send)), nil))
}

// gatherStep gathers every rank's send, all of one length, into root's
// recv, in rank order (nonblocking, as allgatherStep).
func gatherStep[T mpi.Scalar](s step, send, recv []T, root int) error {
	return s.wait(mpi.Igatherv(s.c, send, recv, equalCounts(s.c.Size(), len(send)), nil, root))
}

// scatterStep sends each rank its block of root's send, all blocks of
// len(recv) elements, into recv (nonblocking, as allgatherStep).
func scatterStep[T mpi.Scalar](s step, send, recv []T, root int) error {
	return s.wait(mpi.Iscatterv(s.c, send, equalCounts(s.c.Size(), len(recv)), nil, recv, root))
}

// allgathervStep, gathervStep and scattervStep are the in-place
// v-collectives of AllGather, GatherAndStack and Scatter's blocks.
func allgathervStep[T mpi.Scalar](s step, buf []T, counts, displs []int) error {
	if s.blocking() {
		return mpi.AllgathervInPlace(s.c, buf, counts, displs)
	}
	return s.wait(mpi.IallgathervInPlace(s.c, buf, counts, displs))
}

func gathervStep[T mpi.Scalar](s step, buf []T, counts, displs []int, root int) error {
	if s.blocking() {
		return mpi.GathervInPlace(s.c, buf, counts, displs, root)
	}
	return s.wait(mpi.IgathervInPlace(s.c, buf, counts, displs, root))
}

func scattervStep[T mpi.Scalar](s step, buf []T, counts, displs []int, root int) error {
	if s.blocking() {
		return mpi.ScattervInPlace(s.c, buf, counts, displs, root)
	}
	return s.wait(mpi.IscattervInPlace(s.c, buf, counts, displs, root))
}

// bcastChunks broadcasts b from root in pieces of at most wire.MaxChunk
// bytes. Every rank passes a b of the same length.
func (s step) bcastChunks(b []byte, root int) error {
	for off := 0; off < len(b); off += wire.MaxChunk {
		if err := bcastStep(s, b[off:min(off+wire.MaxChunk, len(b))], root); err != nil {
			return err
		}
	}
	return nil
}
