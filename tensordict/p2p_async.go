// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// An IRecv has no goroutine of its own: it is an irecvOp that advances
// when somebody steps it (its Pending's Wait or Test, any receive of this
// package while it waits, the end of its context). Until its header
// arrives it holds no lock: a step probes for the header (MPI_Iprobe)
// holding nothing and, once it is there, takes the TensorDict's state and
// the tags' receive locks without waiting (TryLock). From the header on,
// it holds them until the transfer ends, as Recv does, and each step
// receives the messages that have arrived.
//
// IRecvs from one source whose transfers share a tag take them in the
// order they were called: an IRecv may xfer.Probe for its header only when no
// IRecv called before it from that source on one of its tags is pending.
// A Recv first waits, stepping them, for the IRecvs called before it from
// its source on one of its tags.

// irecvOp is the state of one IRecv.
type irecvOp struct {
	mu      sync.Mutex // held by whoever steps it
	l       link       // l.Ctx is ctx below
	td      *TensorDict
	q       *xfer.Queued // its place among the background receives
	tags    []int        // the transfer's distinct tags, sorted
	tag0    int          // the header's tag
	cancel  context.CancelCauseFunc
	stop    func() bool // unregisters the context's AfterFunc
	r       recvOp      // the receive, from its header on
	started bool        // holds r.s and its receive locks

	over atomic.Bool   // set before done is closed
	done chan struct{} // closed when the IRecv ends
	err  error         // set before over
	tag  int
	src  int // the sender, once done without error (see Pending.Source)
	// unbounded is set when no context of the caller's ends op: its
	// peer's leaving the group does (see progress).
	unbounded bool
}

// TryStep steps op without waiting unless another goroutine is stepping
// it (xfer.BackgroundOp).
func (op *irecvOp) TryStep(free bool) {
	if op.mu.TryLock() {
		op.step(free)
		op.mu.Unlock()
	}
}

// Over reports whether op has ended (xfer.BackgroundOp).
func (op *irecvOp) Over() bool { return op.over.Load() }

// recvState returns td's transfer state for a Recv with l's options,
// locked and prepared, once no IRecv called before it from its source on
// one of its tags is pending: those come first. It steps them meanwhile,
// waiting as l's context allows; it costs an atomic load when no IRecv is
// pending.
func recvState(l *link, td *TensorDict) (*p2pState, error) {
	seq := xfer.NextSeq()
	for {
		s, err := p2pStateOf(l.Op, td)
		if err != nil {
			return nil, err
		}
		if err := s.prepare(l); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if seq == xfer.AllSeq || xfer.StepQueue(l.Group, l.Peer, seq, s.tagSet) {
			return s, nil
		}
		// An earlier IRecv may need td's state: wait without it.
		tags := slices.Clone(s.tagSet)
		s.mu.Unlock()
		err = xfer.Poll(l.Ctx, func() (bool, error) {
			if xfer.StepQueue(l.Group, l.Peer, seq, tags) {
				return true, nil
			}
			xfer.StepAll()
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for the IRecvs called before from rank %d on tags %v: %w", l.Peer, tags, err)
		}
	}
}

// progress steps op without waiting and reports whether it moved or ended:
// the IRecvs before it in its queue first. When op cannot move, it steps
// every other pending IRecv too (xfer.StepAll).
func (op *irecvOp) progress() bool {
	if op.over.Load() {
		return true
	}
	moved := false
	if free := op.q.Step(); op.mu.TryLock() {
		moved = op.step(free)
		op.mu.Unlock()
	}
	if !moved {
		xfer.StepAll()
		if op.unbounded {
			if err := op.l.PeerGone(); err != nil {
				op.peerLeft(err)
			}
		}
	}
	return moved || op.over.Load()
}

// peerLeft ends op, whose peer has left the group (err wraps
// group.ErrPeerLeft), unless what the peer sent before it left completes
// it: op first takes what has arrived, as a Recv looks for its message
// once more (see xfer.Probe).
func (op *irecvOp) peerLeft(err error) {
	op.mu.Lock()
	defer op.mu.Unlock()
	for !op.over.Load() && op.step(op.q.Step()) {
	}
	if op.over.Load() {
		return
	}
	if op.started {
		op.finish(fmt.Errorf("after the header: %w", err))
		return
	}
	op.finish(fmt.Errorf("waiting for the header: %w", err))
}

// step advances op without waiting (op.mu held) and reports whether it
// moved or ended; free says whether it may start (no IRecv called before
// it from its source on one of its tags is pending). Once op's context
// has ended, it ends op: at once before the header, otherwise after
// receiving what has arrived.
func (op *irecvOp) step(free bool) bool {
	if op.over.Load() {
		return true
	}
	l := &op.l
	if !op.started {
		if l.Ctx.Err() != nil {
			hint := ""
			if errors.Is(l.Ctx.Err(), context.DeadlineExceeded) {
				hint = l.waitsElsewhere(op.tag0)
			}
			op.finish(fmt.Errorf("waiting for the header: %w%s", context.Cause(l.Ctx), hint))
			return true
		}
		if !free {
			return false
		}
		// A xfer.Probe on the header's tag, holding nothing, keeps an idle
		// step to one MPI_Iprobe; td must not change until the IRecv
		// ends, so its header tag stays the one IRecv computed.
		if !l.Arrived(op.tag0) {
			return false
		}
		s, ok, err := tryP2PStateOf(l.Op, op.td)
		switch {
		case !ok:
			return false
		case err != nil:
			op.finish(refused(l, err))
			return true
		}
		if err := s.prepare(l); err != nil {
			s.mu.Unlock()
			op.finish(refused(l, err))
			return true
		}
		if !s.recvHeld.TryLock(l.Group, l.Peer, true, s.tagSet) {
			s.mu.Unlock()
			return false
		}
		op.r, op.started = recvOp{l: l, td: op.td, s: s}, true
	}
	phase, i := op.r.phase, op.r.i
	done, err := op.r.advance(false)
	if ctx := l.Ctx; done && op.r.phase == phaseHeader && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The context ended during this step: say why, as above.
		err = fmt.Errorf("waiting for the header: %w", context.Cause(ctx))
	}
	switch {
	case done:
		op.tag = op.r.tag
		if err == nil {
			err = op.r.s.takeValues(l, op.td)
		}
		if err == nil {
			op.src = l.Peer // the sender, for AnySource too
			op.td.receivedFrom(l.Peer)
		}
		op.finish(err)
		return true
	case op.r.phase == phaseHeader:
		// Nothing has arrived: hold nothing.
		op.release()
		return false
	}
	return op.r.phase != phase || op.r.i != i
}

// refused returns err, the error that stops a receive over l before it
// takes its transfer's header, which has arrived: when td's storage was
// released, joined with the error of consuming the transfer
// (link.refuseIncoming), as Recv does, so that the sender is not left
// blocked and no later receive takes the stale transfer.
func refused(l *link, err error) error {
	if errors.Is(err, tensor.ErrReleased) {
		err = errors.Join(err, l.refuseIncoming())
	}
	return err
}

// release gives back the state and locks a started op holds.
func (op *irecvOp) release() {
	if op.started {
		s := op.r.s
		s.recvHeld.Unlock()
		s.mu.Unlock()
		op.r, op.started = recvOp{}, false
	}
}

// finish ends op with err (op.mu held): it releases what op holds, leaves
// its queue and wakes its waiters.
func (op *irecvOp) finish(err error) {
	op.release()
	if err != nil {
		op.err = xfer.LogFailed(op.l.Op, op.l.Errorf("%w", err))
	}
	op.td = nil
	op.q.Dequeue()
	op.stop()
	op.cancel(nil)
	op.over.Store(true)
	close(op.done)
}

// end runs when op's context ends (op.mu not held), on the context's
// AfterFunc goroutine or on Cancel's. Ended by the IRecv's own context, op
// ends as a Recv whose context ends: at once before the header, otherwise
// after receiving what has already arrived. Ended by Cancel or by the
// collection of its Pending after the header, it consumes and discards
// the rest of the transfer (see recvOp.drainRest), so that the sender is
// not left blocked.
func (op *irecvOp) end() {
	op.mu.Lock()
	defer op.mu.Unlock()
	if cause := context.Cause(op.l.Ctx); op.started && (cause == errCanceled || cause == errDropped) {
		op.finish(errors.Join(fmt.Errorf("after the header: %w", cause), op.r.drainRest()))
		return
	}
	for !op.over.Load() {
		op.step(false)
	}
}

// wait steps op until it ends, polling as xfer.Poll does, with its pauses
// started over whenever a message arrives.
func (op *irecvOp) wait() {
	for !op.over.Load() {
		if err := xfer.Poll(op.l.Ctx, func() (bool, error) { return op.progress(), nil }); err != nil {
			// The context has ended: its AfterFunc ends op.
			<-op.done
		}
	}
}

// IRecv starts receiving into td what rank src of the group sends, as Recv
// does, and returns at once; Wait completes it and returns Recv's error,
// and Test makes progress without blocking. It takes Recv's options. src
// may be AnySource; Pending.Source names the sender once it completes,
// and WaitAny waits for the first of several IRecvs.
//
// An IRecv holds no goroutine, and no lock while its transfer's header has
// not arrived: it makes progress when its Pending's Wait or Test is called,
// and whenever another receive of this package (Recv, another IRecv's
// Wait) waits, taking the messages that have arrived. So a sender whose
// messages MPI does not buffer (a large storage or leaf) waits until the
// receiving process calls one of those: a program that overlaps an IRecv
// with computation should call Test now and then, or Wait on another
// goroutine. A pending IRecv makes every Recv of the process poll (with
// MPI_Iprobe, sleeping up to 1 ms) instead of blocking in MPI_Probe. From
// the header on, until it ends, the IRecv holds td's transfer lock and the
// tags' receive locks, as Recv does: other transfers of td, and receives
// from src on its tags, wait for it.
//
// IRecvs from one source whose transfers share a tag take them in the
// order they were called, whatever the order of their Waits, and a Recv
// waits for the IRecvs called before it from its source on one of its
// tags. A message is only received into td's tensors after its header has
// been checked against td's structure, so a sender with another structure
// gets an ErrMismatch error, not a corrupted td. A td whose storage is
// released before the transfer arrives makes Wait return an error
// wrapping tensor.ErrReleased, and the transfer is consumed and
// discarded, as Recv does, so that its sender is not left blocked.
//
// When the context of WithContext ends, or Cancel is called, before the
// header has arrived, the IRecv ends at once with an error wrapping the
// context's error, having received nothing; nothing of it remains, and
// the transfer is left for a later receive. After the header, it ends as
// a Recv whose context ends, and as Cancel says when cancelled. A Pending
// dropped without Wait is still a receive: once the garbage collector
// finds it, the IRecv goes on by itself (a goroutine) and, if its
// transfer's header comes within 2 s (xfer.DrainIdle), takes the
// transfer and discards what td has not received yet, so that the sender
// is not left blocked; otherwise it ends as if cancelled, and the
// transfer is left for a later receive (a sender blocked in a large
// message of it waits for that receive, or for this rank's
// group.Finalize: its Send then fails with group.ErrPeerLeft).
//
// Without WithContext, an IRecv whose sender leaves the group (its
// group.Finalize) before sending the whole transfer ends with an error
// wrapping group.ErrPeerLeft naming that rank, about a second after it
// left, once what it sent before has been taken; from AnySource, once
// every other rank has left. Wait, Test and WaitAny then report it.
func (td *TensorDict) IRecv(src int, opts ...RecvOption) (*Pending, error) {
	p, err := td.irecv(src, opts)
	return p, xfer.LogFailed("IRecv", err)
}

func (td *TensorDict) irecv(src int, opts []RecvOption) (*Pending, error) {
	lv, err := newLink("IRecv", src, "from", resolve(opts, usesRecv))
	if err != nil {
		return nil, err
	}
	op := &irecvOp{l: lv, td: td, done: make(chan struct{})}
	l := &op.l
	// Check td and the options now, as Recv would, so that misuse fails here.
	s, err := p2pStateOf(l.Op, td)
	if err != nil {
		return nil, l.Errorf("%w", err)
	}
	err = s.prepare(l)
	tag0, total, tags := s.tag0, s.total, slices.Clone(s.tagSet)
	s.mu.Unlock()
	if err != nil {
		return nil, l.Errorf("%w", err)
	}
	l.LogStart(int64(total), tag0)
	op.tag0, op.tags, op.unbounded = tag0, tags, l.Ctx.Done() == nil
	l.Ctx, op.cancel = context.WithCancelCause(l.Ctx)
	// Nobody can step op before it is set up: end and the steppers wait
	// for, or try, op.mu.
	op.mu.Lock()
	op.q = xfer.Enqueue(l.Group, l.Peer, tags, op)
	op.stop = context.AfterFunc(l.Ctx, op.end)
	op.mu.Unlock()
	return newIRecvPending(op), nil
}

// errCanceled is the cause of the end of an IRecv that Pending.Cancel
// ended.
var errCanceled = fmt.Errorf("cancelled by Pending.Cancel: %w", context.Canceled)

// Pending is a transfer started by ISend or IRecv, like the list of
// futures tensordict's isend(return_early=True) and
// irecv(return_premature=True) return, or a reduction started by
// IAllReduce or IReduce. Complete it with Wait, or poll it
// with Test; end an IRecv early with Cancel. Until it completes, the
// TensorDict's tensors must not be modified (ISend) or read (IRecv). Its
// buffers stay pinned, or off the Go heap, until then, so the garbage
// collector cannot move them under MPI. Its methods may be called from
// several goroutines at once: a Wait called while another goroutine
// waits blocks until that one has completed the transfer and returns the
// same error, a Test meanwhile reports it not complete, and Cancel ends
// an IRecv however many goroutines wait for it.
type Pending struct {
	mu   sync.Mutex    // held by Wait, Tag and, when free, Test; not by Cancel
	c    *coll.Pending // IAllReduce, IReduce
	l    *link
	reqs xfer.Sends // ISend: every posted message
	held *holds     // ISend: the storages MPI reads, if any
	r    *irecvOp   // IRecv
	err  error
	tag  int
	over bool
	// ISend: the error of a send that reapSends found failed, for Wait
	// and Test to report.
	sendErr error
}

// newIRecvPending returns the Pending of op. Dropped without Wait, it
// ends op when collected (drop), so that op's queue and locks are not held
// forever by a receive nobody will read, nor its sender left blocked.
func newIRecvPending(op *irecvOp) *Pending {
	p := &Pending{l: &op.l, r: op}
	runtime.AddCleanup(p, func(op *irecvOp) { go op.drop() }, op)
	return p
}

// drop ends op, whose Pending was collected without Wait, on a goroutine
// of its own. A dropped IRecv is still a receive: its sender, which may
// be blocked in a message too large for MPI to buffer, is waiting for it,
// and nobody else will step it. So drop steps op for up to xfer.DrainIdle
// (bounded by op's context too), as a drain awaits each message it was
// told of, until op has taken its transfer's header; then it ends op,
// which consumes and discards the rest of the transfer (see end). A
// transfer whose header has not come by then is left for a later
// receive, as Cancel leaves it.
func (op *irecvOp) drop() {
	ctx, cancel := context.WithTimeout(op.l.Ctx, xfer.DrainIdle)
	defer cancel()
	_ = xfer.Poll(ctx, func() (bool, error) {
		op.progress()
		op.mu.Lock()
		defer op.mu.Unlock()
		return op.started || op.over.Load(), nil
	})
	op.cancel(errDropped)
}

// errDropped is the cause of the end of an IRecv whose Pending was
// collected without Wait.
var errDropped = fmt.Errorf("its Pending was dropped without Wait: %w", context.Canceled)

// Wait blocks until the transfer completes and returns its error. Calling
// it again returns the same error. On a nil or zero Pending it returns an
// error. An IRecv's Wait returns, with an error wrapping the context's
// error, when the context of WithContext ends or Cancel is called.
func (p *Pending) Wait() error {
	if p == nil || p.c == nil && p.l == nil {
		return errNotPending("Wait")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wait()
}

// wait is Wait on a Pending returned by ISend, IRecv or an asynchronous
// collective, p.mu held.
func (p *Pending) wait() error {
	if p.c != nil {
		return p.c.Wait()
	}
	if p.over {
		return p.err
	}
	if p.r != nil {
		p.r.wait()
		p.endIRecv()
	} else if _, err := p.l.FinishSends(p.reqs); err != nil || p.sendErr != nil {
		p.err = xfer.LogFailed(p.l.Op, p.l.Errorf("%w", errors.Join(p.sendErr, err)))
	}
	p.over = true
	p.endHolds()
	return p.err
}

// Test reports whether the transfer has completed, and its error if so. It
// does not block: an IRecv receives the messages that have arrived.
func (p *Pending) Test() (bool, error) {
	if p == nil || p.c == nil && p.l == nil {
		return true, errNotPending("Test")
	}
	if !p.mu.TryLock() {
		return false, nil // another goroutine waits for it
	}
	defer p.mu.Unlock()
	if p.c != nil {
		return p.c.Test()
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
	case done && p.sendErr != nil:
		return true, p.wait()
	case done:
		p.over = true
		p.endHolds()
		return true, nil
	case p.l.Ctx.Err() != nil:
		return true, p.wait() // gives up at once, as Wait does
	case p.l.Ctx.Done() == nil && p.l.PeerGone() != nil:
		return true, p.wait() // gives up at once, as Wait does once the peer left
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
		return p.c.Errorf("Pending.Cancel: a collective cannot be cancelled; Wait completes it")
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
	_, werr := p.l.FinishSends(p.reqs)
	p.err = p.l.Errorf("%w", errors.Join(p.sendErr, err, werr))
	p.over = true
	p.endHolds()
	return p.err
}

// endHolds ends the holds of p's ISend, which has completed or given up
// its sends (see holds.end).
func (p *Pending) endHolds() {
	if p.held != nil {
		p.held.End(p.err)
	}
}

// sendsOut holds the ISends not known to have completed, oldest first,
// for the next ISends to test (reapSends). A send's buffers (the
// metadata, a packed copy of the storage) stay pinned by its request
// until a test or wait finds it complete: a Pending dropped without Wait
// kept them until the collector found it and package mpi reaped its
// requests, a few collections later, and 8,000 ISends of the same
// TensorDict dropped that way grew a sender to 1.1 GB before it leveled
// off. Tested by the ISends that follow, what completed is released at
// once, whoever holds the Pending.
var sendsOut struct {
	sync.Mutex
	ps []weak.Pointer[Pending]
}

// reapWindow is how many ISends that have not completed reapSends tests
// per call, beside those it finds complete: a receiver that lags, or
// never takes some transfers, does not make every ISend test them all.
const reapWindow = 8

// trackSend registers p, a new ISend, in sendsOut, after reaping the
// ISends before it. sendsOut refers to p weakly: a Pending dropped without
// Wait is still collected, and its requests left to package mpi, so that
// nothing keeps the last ISends of a program in flight at Finalize.
func trackSend(p *Pending) {
	reapSends()
	sendsOut.Lock()
	sendsOut.ps = append(sendsOut.ps, weak.Make(p))
	sendsOut.Unlock()
}

// reapSends tests the ISends of sendsOut, oldest first, and drops those
// that have completed or were collected, until it has found reapWindow
// that have not: it moves those to the back, so that the next call tests
// others.
func reapSends() {
	sendsOut.Lock()
	defer sendsOut.Unlock()
	q := sendsOut.ps
	var still [reapWindow]weak.Pointer[Pending]
	n, i := 0, 0
	for ; i < len(q) && n < reapWindow; i++ {
		if p := q[i].Value(); p != nil && !p.reaped() {
			still[n] = q[i]
			n++
		}
	}
	clear(q[:i])
	sendsOut.ps = append(q[i:], still[:n]...)
}

// reaped reports whether p, an ISend, has completed: it tests p's sends,
// unless another goroutine holds p (its Wait or Test completes it). A
// send that failed is noted for Wait to report.
func (p *Pending) reaped() bool {
	if !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	if p.over {
		return true
	}
	done, err := xfer.TestAll(p.reqs)
	if err != nil {
		// A later test goes on with the other sends.
		p.sendErr = errors.Join(p.sendErr, err)
		return false
	}
	if done && p.sendErr != nil {
		p.err = xfer.LogFailed(p.l.Op, p.l.Errorf("%w", p.sendErr))
	}
	p.over = done
	if done {
		p.endHolds()
	}
	return done
}

// Tag returns the last tag of the transfer, as tensordict's isend and recv
// return it; for an IRecv it is known once the transfer has completed.
// Called while another goroutine waits, it returns once that Wait has.
func (p *Pending) Tag() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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
// a packed storage are ISend's own copies. Without WithContext, Wait (and
// Test, WaitAny) gives the transfer up the same way when the receiver
// leaves the group (its group.Finalize) without taking it: the error
// wraps group.ErrPeerLeft, naming that rank.
func (td *TensorDict) ISend(dst int, opts ...SendOption) (*Pending, error) {
	p, err := td.isend(dst, opts)
	return p, xfer.LogFailed("ISend", err)
}

func (td *TensorDict) isend(dst int, opts []SendOption) (*Pending, error) {
	var lv link // the Pending keeps it (see link.init)
	l := &lv
	resolveInto(&l.o, opts, usesSend)
	if err := l.init("ISend", dst, "to"); err != nil {
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
	h, err := s.holdForISend()
	if err != nil {
		return nil, l.Errorf("%w", err)
	}
	// The messages are made under the send locks: whether they carry the
	// metadata depends on what the last transfer to the place carried
	// (see p2pState.described).
	if err := s.sendHeld.LockCtx(&l.Link, false, s.tagSet); err != nil {
		h.End(nil) // nothing posted
		return nil, l.Errorf("%w", err)
	}
	defer s.sendHeld.Unlock()
	msgs, tags, _, err := s.messages(l, true, false)
	if err != nil {
		h.End(nil) // nothing posted
		return nil, l.Errorf("%w", err)
	}
	defer clear(msgs) // no reference to td's memory stays in s
	p := &Pending{l: l, tag: s.tag0, held: h}
	if len(s.cur) > 0 {
		p.tag = s.cur[len(s.cur)-1]
	}
	if p.reqs, err = xfer.PostSends(&l.Link, msgs, tags, s.messageName); err != nil {
		// The messages already posted must still complete.
		return nil, p.fail(err)
	}
	if h != nil {
		// Dropped without Wait, p leaves its sends to package mpi: the
		// storages stay held until those complete.
		runtime.AddCleanup(p, func(h *holds) { h.End(errDropped) }, h)
	}
	trackSend(p)
	return p, nil
}
