// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"errors"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// Pending is an asynchronous collective whose steps are posted: what runs
// after them, and the closing step's flag (see Close).
type Pending struct {
	op     string
	s      xfer.Step // where the steps are waited on; its queue is nil
	q      *xfer.Deferred
	flag   []uint8
	errorf func(string, ...any) error
	over   bool
	err    error
	held   Holds // the storages the steps give MPI (see Call.Held)
}

// unbounded is xfer.Step.Unbounded, except that a call whose steps are
// deferred counts as bounded: its steps must be nonblocking, so every rank
// must use the nonblocking form (MPI pairs no blocking collective with a
// nonblocking one), whatever its own call.
func (cl *Call) unbounded() int32 {
	if cl.DeferSteps {
		return 0
	}
	return cl.Step.Unbounded()
}

// Defer makes the steps from now on deferred when cl.DeferSteps is set: a
// collective calls it once the ranks agreed.
func (cl *Call) Defer() {
	if cl.DeferSteps {
		cl.Deferred = new(xfer.Deferred)
	}
}

// closeDeferred ends a call whose steps are deferred, once f returned err:
// it posts the closing step after the deferred ones and returns the
// Pending that completes them. If this rank failed after posting some
// steps, it completes them, as the other ranks do, and closes as a
// blocking collective does; nothing posted returns a nil Pending.
func (cl *Call) closeDeferred(busy func() bool, err error) (*Pending, error) {
	q := cl.Deferred
	cl.Deferred = nil
	if err != nil || q == nil {
		if q != nil {
			err = errors.Join(err, completeSteps(cl.Op, cl.Step, q))
		}
		err = Close(cl.Step, busy, err, cl.Errorf)
		cl.Held.End(err)
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
		err = errors.Join(cl.Errorf("closing the collective: %w", err), completeSteps(cl.Op, cl.Step, q))
		cl.Held.End(err)
		return nil, err
	}
	p := &Pending{op: cl.Op, s: cl.Step, q: q, flag: flag, errorf: cl.Errorf, held: cl.Held}
	cl.Held = Holds{}
	return p, nil
}

// completeSteps waits for the steps q posted, without what follows them:
// a call that failed after posting some must still complete them, as the
// other ranks do.
func completeSteps(op string, s xfer.Step, q *xfer.Deferred) error {
	return (&Pending{op: op, s: s, q: &xfer.Deferred{Reqs: q.Reqs}}).Wait()
}

// Wait completes p's steps in the order they were posted, then runs what
// follows them. A step given up (its context ended) abandons the others.
func (p *Pending) Wait() error {
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
		errs = append(errs, p.errorf("the result is undefined: %w", ErrBusy))
	}
	p.err, p.over, p.q = xfer.LogFailed(p.op, errors.Join(errs...)), true, nil
	p.held.End(p.err)
	return p.err
}

// Test reports whether p's steps have completed, completing p if so.
func (p *Pending) Test() (bool, error) {
	if p.over {
		return true, p.err
	}
	for _, r := range p.q.Reqs {
		done, _, err := r.Test()
		if err != nil {
			return true, p.Wait()
		}
		if !done {
			return false, nil
		}
	}
	return true, p.Wait()
}

// Over reports whether p has completed.
func (p *Pending) Over() bool { return p.over }

// Errorf returns an error prefixed as its call's (Call.Errorf).
func (p *Pending) Errorf(format string, args ...any) error {
	return p.errorf(format, args...)
}

// Holding reports whether p holds storages for its steps (see Drop).
func (p *Pending) Holding() bool { return !p.held.Empty() }

// Drop ends p's holds once its steps, which a Pending dropped without
// Wait leaves to package mpi, complete (see Holds.End).
func (p *Pending) Drop() { p.held.End(errDropped) }

// errDropped is the cause of the end of the holds of a Pending dropped
// without Wait.
var errDropped = errors.New("its Pending was dropped without Wait")
