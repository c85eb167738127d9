// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
)

// Kept structures of point-to-point InitRemote.
//
// A program that sends TensorDicts of one structure to a rank again and
// again with InitRemote would send the same class name and metadata each
// time: for a small TensorDict several times its storage, and past 256
// bytes a message Open MPI's shared memory moves more slowly. Instead the
// first frame of a structure to a rank asks the receiver to keep its class
// name and metadata under a number, its ref (wire.FlagKeep); once that
// frame is sent, the next frames of the same class name and metadata to
// that rank carry only the ref (wire.FlagDescribed) with the header's
// structure hash, leaf count and size, which the receiver checks against
// what it kept.
//
// Each side keeps, per group and peer, wire.KeptRefs structures, in the
// slot of their ref modulo wire.KeptRefs. The sender gives refs in
// increasing order and describes a frame by a ref only after the frame that
// keeps it was sent; MPI delivers the frames of one sender on one tag in
// order, so the receiver has kept (or is keeping) what a described frame
// refers to, even when it refused that frame (DrainInit). A receiver
// whose kept slot holds another ref (another goroutine still keeping it)
// waits up to keptWait for it, then refuses
// the frame: a receive that failed before keeping (given up while MPI was
// writing the frame), a sender that lies. A sender asks to keep a
// structure again, with its metadata, once it has described frames by its
// ref for KeptRenew, so that a receiver that lost one recovers by then.
// (The receiver does not tell the sender: a message the sender might never
// receive would stay queued on the communicator, and Open MPI matches such
// a message against the next communicator that reuses its context once it
// is freed, which stalls that communicator's traffic.)

// KeptFrameMax is the longest InitRemote header message that can ask to
// be kept: a receiver that refuses a longer one (over its limits) reads
// it whole all the same, to keep its structure.
const KeptFrameMax = wire.Size + wire.MaxKeptMeta + wire.InlineMax

// keptWait bounds how long a receiver waits for a ref another goroutine
// is keeping (see above).
const keptWait = 50 * time.Millisecond

// KeptRenew is how long a sender describes frames by a ref before it
// asks to keep the structure again, under a new ref, with its metadata: a
// receiver that lost the frame that kept it (a receive given up while MPI
// was writing the frame) refuses the frames described by it until then.
// 250 ms bounds that outage to a fraction of a second, while the renewals
// cost one frame with metadata per structure and peer four times a
// second at most, nothing beside a loop that sends thousands of frames a
// second (a judgment, not measured).
const KeptRenew = 250 * time.Millisecond

// keptInits holds each group's kept structures.
var keptInits = proto.Slot[keptPlaces]{New: func() *keptPlaces { return &keptPlaces{} }}

// keptPlaces is a group's kept structures, by peer rank: those this rank
// sent to each (to), those it received from each (from).
type keptPlaces struct {
	mu   sync.Mutex
	to   map[int]*keptPeer
	from map[int]*keptPeer
}

// keptPeer is what one side keeps for one peer.
type keptPeer struct {
	last uint64 // the sender's last ref given
	recs [wire.KeptRefs]keptRec
}

// keptPeerOf returns what *m holds for rank, made if missing.
func keptPeerOf(m *map[int]*keptPeer, rank int) *keptPeer {
	p := (*m)[rank]
	if p == nil {
		if *m == nil {
			*m = map[int]*keptPeer{}
		}
		p = &keptPeer{}
		(*m)[rank] = p
	}
	return p
}

// keptRec is a kept structure: the class name and metadata of an InitRemote
// frame, with its header's structure hash, leaf count and storage size.
type keptRec struct {
	ref    uint64
	sent   bool      // the sender's frame that keeps it was sent,
	sentAt time.Time // then
	hash   uint64
	leaves int64
	total  int64
	// The sender's copies are reused; the receiver's never change.
	class, meta []byte
}

// current reports whether a sender's kept structure r, whose keeping
// frame was sent, still describes frames: until KeptRenew after that
// frame, when it is kept again.
func (r *keptRec) current() bool { return time.Since(r.sentAt) < KeptRenew }

func (r *keptRec) matches(class string, meta []byte, hash uint64, leaves, total int64) bool {
	return r.ref != 0 && r.hash == hash && r.leaves == leaves && r.total == total && string(r.class) == class && bytes.Equal(r.meta, meta)
}

// Kept is how an InitRemote frame travels: with its metadata (Ref 0),
// with its metadata to keep under Ref, or described by Ref.
type Kept struct {
	Ref       uint64
	Described bool
}

// Apply sets h's flags and ref for k, and returns the class name and
// metadata the frame carries: class and meta, or none when described.
func (k Kept) Apply(h *wire.Header, class string, meta []byte) (string, []byte) {
	h.Ref = k.Ref
	switch {
	case k.Described:
		h.Flags |= wire.FlagDescribed
		return "", nil
	case k.Ref != 0:
		h.Flags |= wire.FlagKeep
	}
	return class, meta
}

// KeepRef returns how a point-to-point InitRemote frame of class name
// class, metadata meta, structure hash, leaf count and storage size
// travels to l.Peer: described by the ref of a structure it kept there,
// else to be kept under a new ref when the metadata is small enough, else
// with its metadata alone. A frame to keep must be followed by l.KeptSent
// with the outcome of its send.
func (l *Link) KeepRef(class string, meta []byte, hash uint64, leaves, total int64) Kept {
	if len(meta)+len(class) > wire.MaxKeptMeta {
		return Kept{}
	}
	// The JSON with or without the spaces that align what follows it.
	meta = bytes.TrimRight(meta, " ")
	k := keptInits.Of(l.Group)
	k.mu.Lock()
	defer k.mu.Unlock()
	p := keptPeerOf(&k.to, l.Peer)
	for i := range p.recs {
		r := &p.recs[i]
		if !r.matches(class, meta, hash, leaves, total) {
			continue
		}
		if !r.sent {
			return Kept{} // another goroutine is sending the frame that keeps it
		}
		if r.current() {
			return Kept{Ref: r.ref, Described: true}
		}
		r.ref = 0 // keep it again, under a new ref
		break
	}
	p.last++
	r := &p.recs[p.last%wire.KeptRefs]
	*r = keptRec{ref: p.last, hash: hash, leaves: leaves, total: total, class: append(r.class[:0], class...), meta: append(r.meta[:0], meta...)}
	return Kept{Ref: p.last}
}

// KeptSent records the outcome of the frame that keeps k's structure at
// l.Peer: sent (err nil), the next frames of that structure are described
// by it; else it is forgotten, and the next frame of the structure asks
// to keep it again (under a new ref: the receiver may still get this one).
func (l *Link) KeptSent(k Kept, err error) {
	if k.Ref == 0 || k.Described {
		return
	}
	places := keptInits.Of(l.Group)
	places.mu.Lock()
	if rec := &places.to[l.Peer].recs[k.Ref%wire.KeptRefs]; rec.ref == k.Ref {
		if err == nil {
			rec.sent, rec.sentAt = true, time.Now()
		} else {
			rec.ref = 0
		}
	}
	places.mu.Unlock()
}

// Keep keeps the class name and metadata of f, an InitRemote frame from
// l.Peer with wire.FlagKeep.
func (l *Link) Keep(f *wire.Frame) {
	k := keptInits.Of(l.Group)
	rec := keptRec{ref: f.Ref, hash: f.Hash, leaves: f.Leaves, total: f.Total, class: bytes.Clone(f.Class), meta: bytes.Clone(f.Meta)}
	k.mu.Lock()
	p := keptPeerOf(&k.from, l.Peer)
	p.recs[f.Ref%wire.KeptRefs] = rec
	k.mu.Unlock()
}

// Describe sets the class name and metadata of f, an InitRemote frame
// from l.Peer with wire.FlagDescribed, to those kept under its ref, after
// checking that its header is the kept frame's and that they are within
// lim, this receive's limits.
func (l *Link) Describe(f *wire.Frame, lim wire.Limits) error {
	k := keptInits.Of(l.Group)
	var deadline time.Time
	var found error
	err := Poll(l.Ctx, func() (bool, error) {
		k.mu.Lock()
		var rec keptRec
		if p := k.from[l.Peer]; p != nil {
			rec = p.recs[f.Ref%wire.KeptRefs]
		}
		k.mu.Unlock()
		if rec.ref == f.Ref {
			found = describeFrom(f, rec, lim)
			return true, nil
		}
		// Another goroutine may be keeping it (see the top of the file).
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(keptWait)
		}
		if now.After(deadline) {
			return false, fmt.Errorf("header described by structure %d, which this rank did not keep (it keeps %d; a receive from this rank failed?): %w",
				f.Ref, rec.ref, wire.ErrHeader)
		}
		return false, nil
	})
	if err != nil && err == l.Ctx.Err() {
		return fmt.Errorf("waiting for kept structure %d: %w", f.Ref, context.Cause(l.Ctx))
	}
	return errors.Join(err, found)
}

// describeFrom sets the class name and metadata of f to rec's, the kept
// structure its ref names, after checking that f's header is rec's and
// that they are within lim.
func describeFrom(f *wire.Frame, rec keptRec, lim wire.Limits) error {
	if rec.hash != f.Hash || rec.leaves != f.Leaves || rec.total != f.Total {
		return fmt.Errorf("header described by kept structure %d announces %d leaves, %d bytes and structure hash %#x; it kept %d leaves, %d bytes and %#x: %w",
			f.Ref, f.Leaves, f.Total, f.Hash, rec.leaves, rec.total, rec.hash, wire.ErrHeader)
	}
	lim = lim.Resolve()
	if int64(len(rec.meta)) > lim.MaxMeta {
		return &wire.LimitError{Field: "kept metadata length", Value: int64(len(rec.meta)), Limit: lim.MaxMeta}
	}
	if len(rec.class) > lim.MaxClass {
		return &wire.LimitError{Field: "kept class name length", Value: int64(len(rec.class)), Limit: int64(lim.MaxClass)}
	}
	f.Class, f.Meta = rec.class, rec.meta
	return nil
}
