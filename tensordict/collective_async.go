// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"runtime"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// IAllReduce starts AllReduce and returns a Pending that completes it, like
// tensordict's all_reduce(async_op=True): the reduction goes on in MPI while
// the caller computes. Every rank of the group calls it, in the same order
// as its other collectives on the group.
//
// IAllReduce returns once the ranks have agreed (the structure, op and
// dtype checks of AllReduce, which need every rank to have called it): an
// error found there is returned by IAllReduce on every rank, and nothing is
// reduced. It then posts every reduction step as a nonblocking MPI
// collective (one for a consolidated storage, else one per large leaf or
// bucket of small ones) and returns. Until Wait (or a Test that reports
// completion) returns, td's tensors must be neither read nor written: the
// results, and for leaves that are not contiguous, of half precision or in
// buckets, their copy back into td, arrive only then, as does ReduceAvg's
// division. Wait is bounded by the context of WithContext as AllReduce's
// steps are (a step given up breaks the group). Several IAllReduce and
// IReduce calls may be in flight on one group at once; other collectives on
// the group may run meanwhile. A Pending dropped without Wait leaves its
// steps to MPI (see mpi.Request) and td without the results.
//
// Options: those of AllReduce.
func (td *TensorDict) IAllReduce(op ReduceOp, opts ...CollectiveOption) (*Pending, error) {
	return runCollectiveAsync("IAllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *collCall) error {
		return cl.reduce(td, op, -1, nil)
	})
}

// IReduce starts Reduce into rank dst's td and returns a Pending that
// completes it, like tensordict's reduce(async_op=True,
// return_premature=True). Its rules are those of IAllReduce; on the ranks
// other than dst, td is only read, and must not be written until Wait.
func (td *TensorDict) IReduce(dst int, op ReduceOp, opts ...CollectiveOption) (*Pending, error) {
	return runCollectiveAsync("IReduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *collCall) error {
		return cl.reduce(td, op, dst, cl.rootRange("dst", dst))
	})
}

// unbounded is xfer.Step.Unbounded, except that a call whose steps are
// deferred counts as bounded: its steps must be nonblocking, so every rank
// must use the nonblocking form (MPI pairs no blocking collective with a
// nonblocking one), whatever its own call.
func (cl *collCall) unbounded() int32 {
	if cl.deferSteps {
		return 0
	}
	return cl.Step.Unbounded()
}

// collPending is the part of a Pending that an asynchronous collective
// returns: its posted steps, what runs after them, and the closing step's
// flag (see closeCollective).
type collPending struct {
	op     string
	s      xfer.Step // where the steps are waited on; its queue is nil
	q      *xfer.Deferred
	flag   []uint8
	errorf func(string, ...any) error
	over   bool
	err    error
	held   holds // the storages the steps give MPI (see coll.held)
}

// runCollectiveAsync is runCollective for a collective whose f defers its
// steps (see startCollective), returning a Pending that completes them.
func runCollectiveAsync(op string, root int, bytes func(rank int) int64, o remoteOptions, f func(cl *collCall) error) (*Pending, error) {
	p, err := startCollective(op, root, bytes, o, true, f)
	if err != nil {
		return nil, err
	}
	pe := &Pending{c: p}
	if !p.held.Empty() {
		// Dropped without Wait, pe leaves its steps to package mpi: the
		// storages stay held until those complete.
		runtime.AddCleanup(pe, func(p *collPending) { p.held.End(errDropped) }, p)
	}
	return pe, nil
}

// closeDeferred ends a call whose steps are deferred, once f returned err:
// it posts the closing step after the deferred ones and returns the
// collPending that completes them. If this rank failed after posting some
// steps, it completes them, as the other ranks do, and closes as a
// blocking collective does; nothing posted returns a nil collPending.
func (cl *collCall) closeDeferred(busy func() bool, err error) (*collPending, error) {
	q := cl.Deferred
	cl.Deferred = nil
	if err != nil || q == nil {
		if q != nil {
			err = errors.Join(err, completeSteps(cl.op, cl.Step, q))
		}
		err = closeCollective(cl.Step, busy, err, cl.errorf)
		cl.held.End(err)
		return nil, err
	}
	flag := []uint8{0}
	if busy() {
		flag[0] = 1
	}
	cl.Deferred = q
	err = xfer.Allreduce(cl.Step, flag, mpi.OpMax) // the closing step, queued
	cl.Deferred = nil
	if err != nil {
		err = errors.Join(cl.errorf("closing the collective: %w", err), completeSteps(cl.op, cl.Step, q))
		cl.held.End(err)
		return nil, err
	}
	p := &collPending{op: cl.op, s: cl.Step, q: q, flag: flag, errorf: cl.errorf, held: cl.held}
	cl.held = holds{}
	return p, nil
}

// completeSteps waits for the steps q posted, without what follows them:
// a call that failed after posting some must still complete them, as the
// other ranks do.
func completeSteps(op string, s xfer.Step, q *xfer.Deferred) error {
	return (&collPending{op: op, s: s, q: &xfer.Deferred{Reqs: q.Reqs}}).wait()
}

// wait completes p's steps in the order they were posted, then runs what
// follows them. A step given up (its context ended) abandons the others.
func (p *collPending) wait() error {
	if p.over {
		return p.err
	}
	var errs []error
	for i, r := range p.q.Reqs {
		if err := p.s.Wait(r, nil); err != nil {
			errs = append(errs, err)
			if errors.Is(err, group.ErrBroken) {
				for _, rest := range p.q.Reqs[i+1:] {
					rest.Abandon()
				}
				break
			}
		}
	}
	if len(errs) == 0 {
		for _, f := range p.q.After {
			if err := f(); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	if len(errs) == 0 && p.flag != nil && p.flag[0] != 0 {
		errs = append(errs, p.errorf("the result is undefined: %w", errBusy))
	}
	p.err, p.over, p.q = xfer.LogFailed(p.op, errors.Join(errs...)), true, nil
	p.held.End(p.err)
	return p.err
}

// test reports whether p's steps have completed, completing p if so.
func (p *collPending) test() (bool, error) {
	if p.over {
		return true, p.err
	}
	for _, r := range p.q.Reqs {
		done, _, err := r.Test()
		if err != nil {
			return true, p.wait()
		}
		if !done {
			return false, nil
		}
	}
	return true, p.wait()
}
