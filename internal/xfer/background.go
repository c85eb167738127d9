// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
)

// Background receives (tensordict's IRecv) hold no goroutine and no MPI
// call while they wait: they proceed when some call steps them without
// waiting, their own Wait or Test, or any receive of the protocol while
// it polls (RecvExact, StepAll). So that a sender blocked in a large
// message of a receive nobody waits for yet goes on, as if the receive
// proceeded in the background.
//
// The background receives from one source of one group are queued in the
// order they were called. One whose transfer shares a tag with an older
// one still pending must not start (probe for its header) before it: MPI
// would give it the older one's messages. A blocking receive on the same
// tags waits for the older background ones the same way (StepQueue).

// A BackgroundOp is one background receive.
type BackgroundOp interface {
	// TryStep advances the op without waiting, unless another goroutine
	// is stepping it; free says whether it may start (no older pending
	// op of its queue shares a tag with it).
	TryStep(free bool)
	// Over reports whether the op has ended.
	Over() bool
}

// Queued is a BackgroundOp in its queue.
type Queued struct {
	op   BackgroundOp
	key  queueKey
	tags []int  // the transfer's distinct tags, sorted
	seq  uint64 // position in the queues, in call order
}

// queueKey names the background receives from one source of one group.
type queueKey struct {
	g    *group.Group
	peer int
}

// queues holds the background receives that have not ended, per source,
// in call order, and counts them in pending.
var queues = struct {
	sync.Mutex
	m       map[queueKey][]*Queued
	next    uint64 // the seq of the next one
	pending atomic.Int64
}{m: map[queueKey][]*Queued{}}

// AllSeq stands for "every background receive called so far" in
// StepQueue.
const AllSeq = math.MaxUint64

// Enqueue adds op, a receive from peer (or mpi.AnySource) on g over the
// distinct sorted tags, after the others from peer.
func Enqueue(g *group.Group, peer int, tags []int, op BackgroundOp) *Queued {
	q := &Queued{op: op, key: queueKey{g: g, peer: peer}, tags: tags}
	queues.Lock()
	q.seq = queues.next
	queues.next++
	queues.m[q.key] = append(queues.m[q.key], q)
	queues.pending.Add(1)
	queues.Unlock()
	return q
}

// Dequeue removes q from its queue, once its op has ended.
func (q *Queued) Dequeue() {
	queues.Lock()
	defer queues.Unlock()
	ops := queues.m[q.key]
	for i, o := range ops {
		if o == q {
			ops = slices.Delete(ops, i, i+1)
			queues.pending.Add(-1)
			break
		}
	}
	if len(ops) == 0 {
		delete(queues.m, q.key)
		return
	}
	queues.m[q.key] = ops
}

// Step steps the receives queued before q, then reports whether q is free
// to start: no older one still pending shares a tag with it.
func (q *Queued) Step() (free bool) {
	return StepQueue(q.key.g, q.key.peer, q.seq, q.tags)
}

// Pending returns how many background receives have not ended.
func Pending() int64 { return queues.pending.Load() }

// NextSeq returns the position the next background receive will get: the
// ones called so far are before it. With none pending it returns AllSeq,
// without taking a lock.
func NextSeq() uint64 {
	if Pending() == 0 {
		return AllSeq
	}
	queues.Lock()
	defer queues.Unlock()
	return queues.next
}

// StepQueue steps, oldest first and without waiting, the background
// receives from peer on g called before seq, each allowed to start when
// no older pending one it must follow (see follows) is pending. It
// reports whether none of them that a receive from peer on tags (sorted)
// must follow is left pending. peer may be mpi.AnySource: a receive from
// any source follows every older one on g that shares a tag with it, and
// a receive from one source follows the older ones from any source too.
func StepQueue(g *group.Group, peer int, seq uint64, tags []int) bool {
	queues.Lock()
	ops := older(g, peer, seq)
	queues.Unlock()
	clear := true
	var busy []*Queued // the older ones still pending
	for _, o := range ops {
		o.op.TryStep(!slices.ContainsFunc(busy, func(b *Queued) bool { return follows(o.key.peer, o.tags, b) }))
		if !o.op.Over() {
			busy = append(busy, o)
			clear = clear && !follows(peer, tags, o)
		}
	}
	return clear
}

// follows reports whether a receive from peer on tags (sorted) must wait
// for the older background receive b: b may take the messages it would.
func follows(peer int, tags []int, b *Queued) bool {
	meet := peer == b.key.peer || peer == mpi.AnySource || b.key.peer == mpi.AnySource
	return meet && overlaps(tags, b.tags)
}

// older returns, in call order, the background receives on g called
// before seq that StepQueue steps for a receive from peer: those from
// peer; every one of g when peer is mpi.AnySource or some receive from
// any source is pending on g, so that each one's freedom is judged
// against all the older ones it must follow. queues must be locked.
func older(g *group.Group, peer int, seq uint64) []*Queued {
	before := func(ops []*Queued) []*Queued {
		n, _ := slices.BinarySearchFunc(ops, seq, func(o *Queued, seq uint64) int { return cmp.Compare(o.seq, seq) })
		return ops[:n]
	}
	if peer != mpi.AnySource && len(queues.m[queueKey{g: g, peer: mpi.AnySource}]) == 0 {
		return slices.Clone(before(queues.m[queueKey{g: g, peer: peer}]))
	}
	var all []*Queued
	for k, ops := range queues.m {
		if k.g == g {
			all = append(all, before(ops)...)
		}
	}
	slices.SortFunc(all, func(a, b *Queued) int { return cmp.Compare(a.seq, b.seq) })
	return all
}

// stepping is set while StepAll runs, which is never nested.
var stepping atomic.Bool

// StepAll steps, without waiting, every pending background receive that
// may start or has started. It costs an atomic load when none is pending.
func StepAll() {
	if Pending() == 0 || !stepping.CompareAndSwap(false, true) {
		return
	}
	defer stepping.Store(false)
	queues.Lock()
	keys := make([]queueKey, 0, len(queues.m))
	for k := range queues.m {
		keys = append(keys, k)
	}
	queues.Unlock()
	for _, k := range keys {
		StepQueue(k.g, k.peer, AllSeq, nil)
	}
}

// overlaps reports whether the sorted tag lists a and b share a tag.
func overlaps(a, b []int) bool {
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] == b[0]:
			return true
		case a[0] < b[0]:
			a = a[1:]
		default:
			b = b[1:]
		}
	}
	return false
}
