// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// An IRecv has no goroutine of its own: it is an irecvOp that advances
// when somebody steps it (its Pending's Wait or Test, a later IRecv's or
// Recv's wait for it, the end of its context). Until its header arrives it
// holds no lock: a step takes the TensorDict's state and the tags' receive
// locks without waiting (TryLock), probes for the header (MPI_Iprobe) and,
// if nothing has come, releases them. From the header on, it holds them
// until the transfer ends, as Recv does, and each step receives the
// messages that have arrived.
//
// IRecvs from one source on one initial tag (WithTag) take transfers in
// the order they were called: they wait in a queue, and only its head may
// probe for a header. A Recv on that source and tag first waits for the
// IRecvs called before it, stepping them.

// irecvOp is the state of one IRecv.
type irecvOp struct {
	mu      sync.Mutex // held by whoever steps it
	l       link       // l.o.ctx is ctx below
	td      *TensorDict
	key     p2pKey // queue: group communicator, source, initial tag
	seq     uint64 // position in the queues, in call order
	cancel  context.CancelCauseFunc
	stop    func() bool // unregisters the context's AfterFunc
	r       recvOp      // the receive, from its header on
	started bool        // holds r.s and its receive locks

	over atomic.Bool   // set before done is closed
	done chan struct{} // closed when the IRecv ends
	err  error         // set before over
	tag  int
}

// irecvQueues holds the IRecvs that have not ended, per key, in call order.
var irecvQueues = struct {
	sync.Mutex
	m    map[p2pKey][]*irecvOp
	next uint64       // the seq of the next IRecv
	n    atomic.Int64 // IRecvs in the queues
}{m: map[p2pKey][]*irecvOp{}}

// queueKey is the key of the IRecv queue a receive with l's options joins.
func queueKey(l *link) p2pKey {
	return p2pKey{c: l.c, peer: l.peer, tag: l.o.tag, recv: true}
}

func (op *irecvOp) enqueue() {
	q := &irecvQueues
	q.Lock()
	op.seq = q.next
	q.next++
	q.m[op.key] = append(q.m[op.key], op)
	q.n.Add(1)
	q.Unlock()
}

func (op *irecvOp) dequeue() {
	q := &irecvQueues
	q.Lock()
	defer q.Unlock()
	ops := q.m[op.key]
	for i, o := range ops {
		if o == op {
			ops = append(ops[:i], ops[i+1:]...)
			q.n.Add(-1)
			break
		}
	}
	if len(ops) == 0 {
		delete(q.m, op.key)
		return
	}
	q.m[op.key] = ops
}

// queueHead returns the oldest IRecv on key, or nil.
func queueHead(key p2pKey) *irecvOp {
	q := &irecvQueues
	q.Lock()
	defer q.Unlock()
	if ops := q.m[key]; len(ops) > 0 {
		return ops[0]
	}
	return nil
}

// stepEarlier steps the IRecvs on key called before seq, oldest first, as
// far as they go without waiting, and reports whether none is left.
func stepEarlier(key p2pKey, seq uint64) bool {
	for {
		h := queueHead(key)
		if h == nil || h.seq >= seq {
			return true
		}
		if h.mu.TryLock() {
			h.step()
			h.mu.Unlock()
		}
		if !h.over.Load() {
			return false
		}
	}
}

// awaitEarlierIRecvs makes a Recv with l's options wait, as its context
// allows, until the IRecvs called before it on the same source and tag
// have ended, stepping them: those come first. It costs an atomic load
// when no IRecv is pending.
func awaitEarlierIRecvs(l *link) error {
	if irecvQueues.n.Load() == 0 {
		return nil
	}
	key := queueKey(l)
	irecvQueues.Lock()
	seq := irecvQueues.next
	irecvQueues.Unlock()
	return pollCtx(l.o.ctx, func() (bool, error) { return stepEarlier(key, seq), nil })
}

// progress steps op without waiting and reports whether it moved or ended:
// the IRecvs before it in its queue first.
func (op *irecvOp) progress() bool {
	if op.over.Load() {
		return true
	}
	if !stepEarlier(op.key, op.seq) || !op.mu.TryLock() {
		return false
	}
	defer op.mu.Unlock()
	return op.step()
}

// step advances op without waiting (op.mu held) and reports whether it
// moved or ended. Once op's context has ended, it ends op: at once before
// the header, otherwise after receiving what has arrived.
func (op *irecvOp) step() bool {
	if op.over.Load() {
		return true
	}
	l := &op.l
	if !op.started {
		if l.o.ctx.Err() != nil {
			op.finish(fmt.Errorf("waiting for the header: %w", context.Cause(l.o.ctx)))
			return true
		}
		if queueHead(op.key) != op {
			return false
		}
		s, ok, err := tryP2PStateOf(l.op, op.td)
		switch {
		case !ok:
			return false
		case err != nil:
			op.finish(err)
			return true
		}
		if err := s.prepare(l); err != nil {
			s.mu.Unlock()
			op.finish(err)
			return true
		}
		if s.held, ok = tryLockTags(s.held, l.c, l.peer, true, s.tagSet); !ok {
			s.mu.Unlock()
			return false
		}
		op.r, op.started = recvOp{l: l, td: op.td, s: s}, true
	}
	phase, i := op.r.phase, op.r.i
	done, err := op.r.advance(false)
	if ctx := l.o.ctx; done && op.r.phase == phaseHeader && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The context ended during this step: say why, as above.
		err = fmt.Errorf("waiting for the header: %w", context.Cause(ctx))
	}
	switch {
	case done:
		op.tag = op.r.tag
		op.finish(err)
		return true
	case op.r.phase == phaseHeader:
		// Nothing has arrived: hold nothing.
		op.release()
		return false
	}
	return op.r.phase != phase || op.r.i != i
}

// release gives back the state and locks a started op holds.
func (op *irecvOp) release() {
	if op.started {
		s := op.r.s
		unlockAll(s.held)
		s.mu.Unlock()
		op.r, op.started = recvOp{}, false
	}
}

// finish ends op with err (op.mu held): it releases what op holds, leaves
// its queue and wakes its waiters.
func (op *irecvOp) finish(err error) {
	op.release()
	if err != nil {
		op.err = logFailed(op.l.op, op.l.errorf("%w", err))
	}
	op.td = nil
	op.dequeue()
	op.stop()
	op.cancel(nil)
	op.over.Store(true)
	close(op.done)
}

// end runs when op's context ends (op.mu not held), on the context's
// AfterFunc goroutine or on Cancel's: it steps op until it ends, which
// with the context over takes no more than the messages already there.
func (op *irecvOp) end() {
	op.mu.Lock()
	defer op.mu.Unlock()
	for !op.over.Load() {
		op.step()
	}
}

// wait steps op until it ends, polling as pollCtx does, with the backoff
// restarted whenever a message arrives.
func (op *irecvOp) wait() {
	for !op.over.Load() {
		if err := pollCtx(op.l.o.ctx, func() (bool, error) { return op.progress(), nil }); err != nil {
			// The context has ended: its AfterFunc ends op.
			<-op.done
		}
	}
}

// IRecv starts receiving into td what rank src of the group sends, as Recv
// does, and returns at once; Wait completes it and returns Recv's error,
// and Test makes progress without blocking. It takes Recv's options.
//
// An IRecv holds no goroutine, and no lock while its transfer's header has
// not arrived: it makes progress when its Pending's Wait or Test is called
// (and when a later IRecv or Recv from the same source on the same tag
// waits for it), taking the messages that have arrived. So a sender whose
// messages MPI does not buffer (a large storage or leaf) waits until the
// receiver calls Wait or Test: a program that overlaps an IRecv with work
// should call Test now and then, or Wait on another goroutine. From the
// header on, until it ends, the IRecv holds td's transfer lock and the
// tags' receive locks, as Recv does: other transfers of td, and receives
// from src on its tags, wait for it.
//
// IRecvs from one source on one initial tag (WithTag) take transfers in
// the order they were called, whatever the order of their Waits, and a
// Recv on that source and tag waits for those called before it. A message
// is only received into td's tensors after its header has been checked
// against td's structure, so a sender with another structure gets an
// ErrMismatch error, not a corrupted td.
//
// When the context of WithContext ends, or Cancel is called, before the
// header has arrived, the IRecv ends at once with an error wrapping the
// context's error, having received nothing; nothing of it remains, and
// the transfer is left for a later receive. After the header, it ends as
// a Recv whose context ends. A Pending dropped without Wait is cancelled
// when the garbage collector finds it.
func (td *TensorDict) IRecv(src int, opts ...RecvOption) (*Pending, error) {
	p, err := td.irecv(src, opts)
	return p, logFailed("IRecv", err)
}

func (td *TensorDict) irecv(src int, opts []RecvOption) (*Pending, error) {
	lv, err := newLink("IRecv", src, "from", resolve(opts, usesRecv))
	if err != nil {
		return nil, err
	}
	op := &irecvOp{l: lv, td: td, done: make(chan struct{})}
	l := &op.l
	// Check td and the options now, as Recv would, so that misuse fails here.
	s, err := p2pStateOf(l.op, td)
	if err != nil {
		return nil, l.errorf("%w", err)
	}
	err = s.prepare(l)
	tag0, total := s.tag0, s.total
	s.mu.Unlock()
	if err != nil {
		return nil, l.errorf("%w", err)
	}
	l.logStart(int64(total), tag0)
	l.o.ctx, op.cancel = context.WithCancelCause(l.o.ctx)
	op.key = queueKey(l)
	// Nobody can step op before it is set up: end and the steppers wait
	// for, or try, op.mu.
	op.mu.Lock()
	op.enqueue()
	op.stop = context.AfterFunc(l.o.ctx, op.end)
	op.mu.Unlock()
	return newIRecvPending(op), nil
}

// errCanceled is the cause of the end of an IRecv that Pending.Cancel
// ended.
var errCanceled = fmt.Errorf("cancelled by Pending.Cancel: %w", context.Canceled)
