// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// Pending is a transfer started by ISend or IRecv, like the list of
// futures tensordict's isend(return_early=True) and
// irecv(return_premature=True) return, or a reduction started by
// IAllReduce or IReduce. Complete it with Wait, or poll it
// with Test; end an IRecv early with Cancel. Until it completes, the
// TensorDict's tensors must not be modified (ISend) or read (IRecv). Its
// buffers stay pinned, or off the Go heap, until then, so the garbage
// collector cannot move them under MPI. A Pending is for one goroutine at
// a time, except Cancel, which may be called from any goroutine.
type Pending struct {
	c    *collPending // IAllReduce, IReduce
	l    *link
	reqs []*mpi.Request // ISend: every posted message
	r    *irecvOp       // IRecv
	err  error
	tag  int
	over bool
}

// newIRecvPending returns the Pending of op. Dropped without Wait, it
// cancels op when collected, so that op's queue and locks are not held
// forever by a receive nobody will read.
func newIRecvPending(op *irecvOp) *Pending {
	p := &Pending{l: &op.l, r: op}
	runtime.AddCleanup(p, func(op *irecvOp) { op.cancel(errDropped) }, op)
	return p
}

// errDropped is the cause of the end of an IRecv whose Pending was
// collected without Wait.
var errDropped = fmt.Errorf("its Pending was dropped without Wait: %w", context.Canceled)

// Wait blocks until the transfer completes and returns its error. Calling
// it again returns the same error. On a nil or zero Pending it returns an
// error. An IRecv's Wait returns, with an error wrapping the context's
// error, when the context of WithContext ends or Cancel is called.
func (p *Pending) Wait() error {
	if p != nil && p.c != nil {
		return p.c.wait()
	}
	if p == nil || p.l == nil {
		return errNotPending("Wait")
	}
	if p.over {
		return p.err
	}
	if p.r != nil {
		p.r.wait()
		p.endIRecv()
	} else if _, err := xfer.FinishSends(p.l.Ctx, p.reqs); err != nil {
		p.err = xfer.LogFailed(p.l.Op, p.l.Errorf("%w", err))
	}
	p.over = true
	return p.err
}

// Test reports whether the transfer has completed, and its error if so. It
// does not block: an IRecv receives the messages that have arrived.
func (p *Pending) Test() (bool, error) {
	if p != nil && p.c != nil {
		return p.c.test()
	}
	if p == nil || p.l == nil {
		return true, errNotPending("Test")
	}
	if p.over {
		return true, p.err
	}
	if p.r != nil {
		if !p.r.progress() || !p.r.over.Load() {
			return false, nil
		}
		p.endIRecv()
		return true, p.err
	}
	switch done, err := xfer.TestAll(p.reqs); {
	case err != nil:
		return true, xfer.LogFailed(p.l.Op, p.fail(err))
	case done:
		p.over = true
		return true, nil
	case p.l.Ctx.Err() != nil:
		return true, p.Wait() // gives up at once, as Wait does
	}
	return false, nil
}

// endIRecv takes the result of p's IRecv, which has ended.
func (p *Pending) endIRecv() {
	p.err, p.tag, p.over = p.r.err, p.r.tag, true
}

// Cancel ends an IRecv that has not completed and returns once it has
// ended; Wait then returns an error wrapping context.Canceled. Before the
// transfer's header has arrived, the IRecv has received nothing and holds
// nothing, and the transfer stays for a later receive. After it, Cancel
// consumes and discards the rest of the transfer, as a Recv does with a
// transfer it refuses (each message awaited at most 2 s), so that the
// sender is not left blocked: td's tensors are then partly written. On a
// completed IRecv, Cancel changes nothing. A pending IRecv holds no MPI
// call or request between its Waits and Tests, and none once cancelled:
// group.Finalize does not refuse on its account.
//
// An ISend cannot be cancelled (MPI deprecates cancelling sends): Cancel
// returns an error and Wait completes it, or gives it up when the context
// of WithContext ends.
func (p *Pending) Cancel() error {
	if p != nil && p.c != nil {
		return p.c.errorf("Pending.Cancel: a collective cannot be cancelled; Wait completes it")
	}
	if p == nil || p.l == nil {
		return errNotPending("Cancel")
	}
	if p.r == nil {
		return p.l.Errorf("Pending.Cancel: an ISend cannot be cancelled; Wait completes it")
	}
	op := p.r
	if op.over.Load() {
		return nil
	}
	if op.stop() {
		// The context's AfterFunc will not run: end op here, with no
		// goroutine.
		op.cancel(errCanceled)
		op.end()
	} else {
		op.cancel(errCanceled) // op has ended, or its AfterFunc is ending it
	}
	<-op.done
	return nil
}

// fail completes p with err after completing its other requests, as
// Wait does.
func (p *Pending) fail(err error) error {
	_, werr := xfer.FinishSends(p.l.Ctx, p.reqs)
	p.err = p.l.Errorf("%w", errors.Join(err, werr))
	p.over = true
	return p.err
}

// Tag returns the last tag of the transfer, as tensordict's isend and recv
// return it; for an IRecv it is known once the transfer has completed.
func (p *Pending) Tag() int {
	if p == nil {
		return 0
	}
	return p.tag
}

// errNotPending is the error of Wait and Test on a nil or zero Pending,
// which no ISend or IRecv returned.
func errNotPending(method string) error {
	return fmt.Errorf("tensordict: Pending.%s: not a Pending returned by ISend or IRecv", method)
}

// ISend starts sending td to rank dst of the group as Send does and
// returns at once; the transfer goes on while the caller works, and Wait
// completes it. It takes Send's options. Every message is posted before
// ISend returns, in the order Send sends them, so ISend pairs with Recv or
// IRecv like Send.
//
// With WithContext, ISend posts nothing if the context has already ended
// (it returns an error wrapping ctx.Err()), and Wait, or Test once the
// context has ended, gives the transfer up as Send does: the error wraps
// ctx.Err(), and MPI still delivers the whole transfer if the receiver
// receives, reading td's tensors until then (see Send). The metadata and
// a packed storage are ISend's own copies.
func (td *TensorDict) ISend(dst int, opts ...SendOption) (*Pending, error) {
	p, err := td.isend(dst, opts)
	return p, xfer.LogFailed("ISend", err)
}

func (td *TensorDict) isend(dst int, opts []SendOption) (*Pending, error) {
	lv, err := newLink("ISend", dst, "to", resolve(opts, usesSend))
	l := &lv
	if err != nil {
		return nil, err
	}
	if err := l.NotStarted(); err != nil {
		return nil, err
	}
	s, err := lockState(l, td)
	if err != nil {
		return nil, l.Errorf("%w", err)
	}
	defer s.mu.Unlock()
	if err := s.prepare(l); err != nil {
		return nil, l.Errorf("%w", err)
	}
	l.LogStart(int64(s.total), s.tag0)
	msgs, tags, err := s.messages(l, true)
	if err != nil {
		return nil, l.Errorf("%w", err)
	}
	defer clear(msgs) // no reference to td's memory stays in s
	p := &Pending{l: l, tag: s.tag0}
	if len(s.cur) > 0 {
		p.tag = s.cur[len(s.cur)-1]
	}
	if s.held, err = xfer.LockTagsCtx(&l.Link, s.held, false, s.tagSet); err != nil {
		return nil, l.Errorf("%w", err)
	}
	defer xfer.UnlockAll(s.held)
	if p.reqs, err = xfer.PostSends(&l.Link, msgs, tags, s.messageName); err != nil {
		// The messages already posted must still complete.
		return nil, p.fail(err)
	}
	return p, nil
}
