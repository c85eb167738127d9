// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// Call is one collective call in progress on one rank. The caller sets
// Op, Lim, Consolidated, DeferSteps and Errors, and Start the rest.
type Call struct {
	xfer.Step        // the group, its library communicator and the call's context
	Op        string // the method name, for errors: "AllReduce"
	Rank      int
	Size      int
	Lim       wire.Limits // resolved by Start (wire.Limits.Resolve)
	// Consolidated is tensordict's WithConsolidated: Broadcast receives
	// into the receiver's storage when the layouts match.
	Consolidated bool
	// DeferSteps makes the steps after the ranks agreed be posted and left
	// to the returned Pending (IAllReduce, IReduce, IAllGather, IBroadcast).
	DeferSteps bool
	// Held: the storages this rank's steps give MPI, until the call ends,
	// or, deferred, until its Pending completes.
	Held Holds
	// Errors makes the errors of the caller's API.
	Errors *Errors
	// busy reports whether another goroutine of this process runs a
	// collective on the group at the same time (proto.Collective).
	busy func() bool
	// closed: the call's last step was an agreement that closed it
	// (Conclude), and needs no Close.
	closed bool
}

// Errors makes the error values the caller's API defines (package
// tensordict's *PeerError and *StructureError), which the collectives
// return wrapped.
type Errors struct {
	// Peer is the error of a ready rank when rank failed with msg.
	Peer func(op string, rank int, msg string) error
	// Structure is the error of every rank when rank's structure differs
	// from ref's, first at key (nil for the batch size).
	Structure func(op string, ref, rank int, key []string, detail string) error
}

// ErrMismatch is matched (errors.Is) by the error of a collective whose
// ranks passed different structures, ops or roots (package tensordict's
// ErrMismatch).
var ErrMismatch = errors.New("structure mismatch")

// ErrConcurrent is matched (errors.Is) by the error of a collective on a
// group on which some rank has run two collectives at once (package
// tensordict's ErrConcurrent).
var ErrConcurrent = errors.New("concurrent collectives on one group")

// ErrBusy is the error of a collective that found another one running
// beside it on its group, on this rank (or, closing, on any).
var ErrBusy = fmt.Errorf("two goroutines of one rank have run collectives on this group at once: %w", ErrConcurrent)

// Start runs the collective cl on g: it takes the group's protocol lock,
// runs f, then the closing step (Close), unless f's last step closed the
// call (Conclude). It logs the start (with root,
// unless negative, and bytes(rank), when bytes is not nil and the line is
// written) and any error. With cl.DeferSteps, f defers its steps once the
// ranks agreed, the closing step is posted after them, and the returned
// Pending completes them all; failures before the steps are posted are
// returned at once. Without DeferSteps the Pending is nil.
func Start(ctx context.Context, g *group.Group, cl *Call, root int, bytes func(rank int) int64, f func(cl *Call) error) (*Pending, error) {
	cl.Step, cl.Rank, cl.Size, cl.Lim = xfer.NewStep(ctx, g), g.Rank(), g.Size(), cl.Lim.Resolve()
	var p *Pending
	err := proto.Collective(g, func(busy func() bool) error {
		if err := proto.Broken(g, "tensordict: "+cl.Op); err != nil {
			return err
		}
		cl.busy = busy
		xfer.LogCollStart(cl.Op, g, root, bytes)
		err := f(cl)
		if !cl.DeferSteps {
			if !cl.closed {
				err = Close(cl.Step, busy, err, cl.Errorf)
			}
			cl.Held.End(err)
			return err
		}
		p, err = cl.closeDeferred(busy, err)
		return err
	})
	if err != nil {
		return nil, xfer.LogFailed(cl.Op, err)
	}
	if cl.DeferSteps && p == nil {
		p = &Pending{op: cl.Op, over: true, errorf: cl.Errorf} // nothing was deferred: complete
	}
	return p, nil
}

// Close ends a collective on every rank of s's group, whatever err (this
// rank's outcome) is: the ranks compare, with one small allreduce, whether
// a second goroutine came to a collective on the group while this one ran
// on any of them. If one did, MPI may have paired this call with another
// call on some rank, and every rank returns ErrBusy (the result is
// undefined); the agreement at the start of every later collective then
// fails too. On a group this call broke (a step given up), there is
// nothing to close: the other ranks are not at this step.
func Close(s xfer.Step, busy func() bool, err error, errorf func(string, ...any) error) error {
	if errors.Is(err, group.ErrBroken) {
		return err
	}
	flag := []uint8{0}
	if busy() {
		flag[0] = 1
	}
	if aerr := xfer.Allreduce(s, flag, mpi.OpMax); aerr != nil {
		return errors.Join(err, errorf("closing the collective: %w", aerr))
	}
	if flag[0] != 0 && err == nil {
		return errorf("the result is undefined: %w", ErrBusy)
	}
	return err
}

// Ready returns the error that stops this rank before the payload moves:
// the context's, or ErrBusy, or nil.
func (cl *Call) Ready() error {
	if err := cl.Ctx.Err(); err != nil {
		return err
	}
	if cl.busy != nil && cl.busy() {
		return ErrBusy
	}
	return nil
}

// Errorf returns an error "tensordict: <op>: rank <r> of <n>: <message>".
func (cl *Call) Errorf(format string, args ...any) error {
	return fmt.Errorf("tensordict: %s: rank %d of %d: %w", cl.Op, cl.Rank, cl.Size, fmt.Errorf(format, args...))
}

// Wrap returns err prefixed like Errorf, or nil.
func (cl *Call) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return cl.Errorf("%w", err)
}

// RootRange returns an error naming what if r is not a rank of the
// group, without the op prefix.
func (cl *Call) RootRange(what string, r int) error {
	if r < 0 || r >= cl.Size {
		return fmt.Errorf("%s %d is out of range [0, %d) of %s", what, r, cl.Size, xfer.DescribeGroup(cl.Group))
	}
	return nil
}

// CheckRoot is the first step of a collective whose ranks each pass its
// root r (Broadcast, GatherAndStack, Scatter, broadcast-mode InitRemote
// and FromRemoteInit): before any message of the collective is posted,
// the ranks compare their roots (xfer.Step.AgreeRoot), and every rank
// returns an error wrapping ErrMismatch, naming the lowest and the
// highest root passed, when they differ. local is this rank's own error
// that stops the call before it starts, or nil, without the op prefix:
// when some rank has one, every rank returns it as Spread does (the
// highest failing rank's). Then, the same on every rank, RootRange's
// error when r is not a rank of the group.
func (cl *Call) CheckRoot(what string, r int, local error) error {
	lo, hi, fail, err := cl.AgreeRoot(r, local != nil)
	if err := cl.rootsVerdict(what, r, local, lo, hi, fail, err); err != nil {
		return err
	}
	return cl.Wrap(cl.RootRange(what, r))
}

// rootsVerdict is the error of every rank once the ranks combined their
// roots (r, this rank's) and failures (local, this rank's) into lo, hi
// and fail (-1: none), err being the combination's own error: nil when
// all passed one root and none failed.
func (cl *Call) rootsVerdict(what string, r int, local error, lo, hi, fail int, err error) error {
	switch {
	case err != nil:
		return cl.Errorf("agreeing on the %s: %w", what, OutOfStep(errors.Join(err, local)))
	case lo != hi:
		return cl.Errorf("ranks passed different roots (%s %d and %d; this rank %d): %w", what, lo, hi, r, errors.Join(ErrMismatch, local))
	case fail >= 0:
		return cl.Spread(fail, local)
	}
	return nil
}

// OutOfStep returns err, the error of an agreement step, also wrapping
// ErrMismatch when the agreement's result shows that the ranks are not in
// the same collective (xfer.ErrOutOfStep).
func OutOfStep(err error) error {
	if errors.Is(err, xfer.ErrOutOfStep) {
		return fmt.Errorf("%w (%w)", err, ErrMismatch)
	}
	return err
}

// ShareFailure makes every rank learn whether some rank failed before the
// payload moved. local is this rank's own error, or nil, without the
// "tensordict: <op>" prefix. If no rank failed, it returns nil on every
// rank. Otherwise a failing rank returns its own error and every other
// rank returns the Errors.Peer error of the lowest failing rank, both
// wrapped with the op and the rank.
func (cl *Call) ShareFailure(local error) error {
	r, err := cl.Agree(local != nil)
	if err != nil {
		return cl.Errorf("agreeing on failures: %w", OutOfStep(errors.Join(err, local)))
	}
	return cl.Spread(r, local)
}

// Conclude is ShareFailure as the last step of a call, which it closes
// as well: a rank on which another goroutine runs a collective on the
// group at this point fails it (ErrBusy, as Close would find), and when
// no rank failed, Start runs no Close after it. A call whose result is
// whole after one message thus takes the message and this one agreement.
func (cl *Call) Conclude(local error) error {
	if local == nil && cl.busy != nil && cl.busy() {
		local = ErrBusy
	}
	err := cl.ShareFailure(local)
	cl.closed = err == nil
	return err
}

// ConcludeRoot is the agreement of a broadcast that started from steady,
// the root of the last broadcast every rank agreed on, without CheckRoot:
// the ranks compare the roots they passed (r, this rank's) as CheckRoot
// does, and share failures as ShareFailure does, or, when last (nothing
// follows), Conclude. Ranks that passed different roots all return an
// error wrapping ErrMismatch. restart is true, on every rank, when all
// passed the same root but not steady's, and none failed: the broadcast
// from steady was not the one they meant, and they start again.
func (cl *Call) ConcludeRoot(what string, r, steady int, local error, last bool) (restart bool, err error) {
	if last && local == nil && cl.busy != nil && cl.busy() {
		local = ErrBusy
	}
	lo, hi, fail, err := cl.AgreeRootMode(r, local != nil)
	if err := cl.rootsVerdict(what, r, local, lo, hi, fail, err); err != nil {
		return false, err
	}
	if lo != steady {
		return true, nil
	}
	cl.closed = last
	return false, nil
}

// Spread returns nil if r == size (nobody failed), else passes rank r's
// error text to every rank, as ShareFailure does. r comes from the other
// ranks, and is checked first (xfer.Step.CheckFailed).
func (cl *Call) Spread(r int, local error) error {
	if err := cl.CheckFailed(r, local != nil); err != nil {
		return cl.Errorf("%w", OutOfStep(errors.Join(err, local)))
	}
	if r == cl.Size {
		return nil
	}
	msg := make([]byte, wire.MaxReportedError)
	if r == cl.Rank {
		copy(msg, local.Error())
	}
	if err := xfer.Bcast(cl.Step, msg, r); err != nil {
		return cl.Errorf("passing rank %d's error: %w", r, errors.Join(err, local))
	}
	if local != nil {
		return cl.Wrap(local)
	}
	return cl.Errorf("%w", cl.Errors.Peer(cl.Op, r, wire.ReportedError(msg)))
}

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
	held   *Holds // the storages the steps give MPI (see Call.Held)
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
// blocking collective does; nothing posted (no Defer, or no step after
// it) returns a nil Pending, closed blocking: every rank posts the same
// steps, so all close alike (a blocking collective never matches a
// nonblocking one).
func (cl *Call) closeDeferred(busy func() bool, err error) (*Pending, error) {
	q := cl.Deferred
	cl.Deferred = nil
	if err != nil || q == nil || len(q.Reqs) == 0 {
		if q != nil {
			err = errors.Join(err, completeSteps(cl.Op, cl.Step, q))
		}
		for i := 0; err == nil && q != nil && i < len(q.After); i++ {
			err = q.After[i]() // what follows no step
		}
		if !cl.closed {
			err = Close(cl.Step, busy, err, cl.Errorf)
		}
		cl.Held.End(err)
		return nil, err
	}
	var flag []uint8
	if !cl.closed {
		flag = []uint8{0}
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
	}
	p := &Pending{op: cl.Op, s: cl.Step, q: q, flag: flag, errorf: cl.Errorf, held: new(Holds)}
	*p.held, cl.Held = cl.Held, Holds{}
	if !p.held.Empty() {
		// Dropped without Wait, p leaves its steps to package mpi: the
		// storages stay held until those complete.
		runtime.AddCleanup(p, func(h *Holds) { h.End(errDropped) }, p.held)
	}
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

// errDropped is the cause of the end of the holds of a Pending dropped
// without Wait.
var errDropped = errors.New("its Pending was dropped without Wait")

// Holds are the storages one transfer (a collective, a Send, an ISend)
// hands to MPI, each held (rawbytes.Hold) from before the transfer takes
// its bytes until MPI no longer reads or writes them: a Release meanwhile
// (tensor.Storage, memmap.Close) leaves the memory in place, and the end
// of the last hold frees it. Every transfer that gives MPI a storage's
// bytes holds the storage through Add and ends with End. Only storages
// whose release frees something are held: external ones (off-heap, memory
// maps) and the receive pool's (Reusable); the Go heap memory of any
// other stays reachable, and pinned under MPI, whatever its release. The
// zero value holds nothing.
type Holds struct {
	first *tensor.Storage
	more  []*tensor.Storage // beyond first: only a transfer of several storages allocates
}

// Add holds st for the transfer (nil: nothing), or returns an error
// wrapping tensor.ErrReleased if st was released.
func (h *Holds) Add(st *tensor.Storage) error {
	if st == nil || !(st.External() || tensorx.Reusable(st)) {
		return nil
	}
	if st == h.first || (len(h.more) > 0 && h.more[len(h.more)-1] == st) {
		return nil // the leaves of one storage, one after another
	}
	if !rawbytes.Hold(st) {
		return fmt.Errorf("a storage of %d bytes: %w", st.Len(), tensor.ErrReleased)
	}
	if h.first == nil {
		h.first = st
	} else {
		h.more = append(h.more, st)
	}
	return nil
}

// Empty reports whether h holds nothing.
func (h *Holds) Empty() bool { return h.first == nil }

// End ends h's holds once MPI no longer uses the storages: at once when
// the transfer ended without an error (every MPI operation it started
// has completed), else once every MPI operation in flight now has (those
// the transfer gave up at its context's end among them; see
// mpix.AfterInFlight). h is empty afterwards; a nil h holds nothing.
func (h *Holds) End(err error) {
	if h == nil || h.first == nil {
		return
	}
	if err != nil {
		held := *h
		mpix.AfterInFlight(held.unhold)
	} else {
		h.unhold()
	}
	*h = Holds{}
}

// unhold ends every hold of h at once.
func (h *Holds) unhold() {
	rawbytes.Unhold(h.first)
	for _, st := range h.more {
		rawbytes.Unhold(st)
	}
}
