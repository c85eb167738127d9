// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// ErrMismatch is matched (errors.Is) by the error of a Recv (or IRecv)
// whose TensorDict differs in structure from the sender's (keys, dtypes or
// shapes of the leaves, the consolidated layout, or the transfer mode or
// tags), and by a collective's *StructureError.
var ErrMismatch = errors.New("structure mismatch")

// ErrLimit is matched (errors.Is) by the error of a receive or a load
// that refused what a peer or a file announced because it exceeds a limit
// (WithMaxBytes, WithMaxMetadataBytes, WithMaxDepth, WithMaxEntries, or a
// header's own bounds), before anything was allocated for it.
var ErrLimit = wire.ErrLimit

// p2pInlineMax is the largest consolidated storage Send puts in the
// metadata message instead of a message of its own.
const p2pInlineMax = 16 << 10

// Send sends td's tensor leaves to rank dst of the group, which receives
// them with Recv (or IRecv) into a TensorDict of the same structure, as
// tensordict's send. Options: WithGroup, WithTag, WithPseudoRandTags,
// WithConsolidated.
//
// By default each leaf is one message, in tensordict's order (sorted keys,
// depth first) and with its tags: WithTag's tag and the following ones, or
// WithPseudoRandTags' sequence. Leaves must be contiguous.
//
// With WithConsolidated, the whole consolidated storage is one message
// (tag WithTag, default 0). When td is consolidated (the result of
// FromRemoteInit or Consolidate is), its storage is sent as is; otherwise
// the leaves are packed into a buffer kept for later calls.
//
// Unlike tensordict, every transfer starts with two small messages on the
// first leaf's tag: a fixed-size header carrying a hash of the structure,
// then the metadata (with the storage itself when it is at most 16 KiB).
// A receiver with a different structure therefore reports the first
// differing key instead of hanging or reading garbage. Encodings and
// buffers are kept with td between calls: once a structure has been sent,
// Sends with WithConsolidated allocate nothing.
//
// Concurrent transfers between the same two ranks must use different tags
// (WithTag); transfers on the same tags are serialized.
func (td *TensorDict) Send(dst int, opts ...SendOption) error {
	return logFailed("Send", td.send(dst, opts))
}

func (td *TensorDict) send(dst int, opts []SendOption) error {
	lv, err := newLink("Send", dst, "to", resolve(opts, usesSend))
	l := &lv
	if err != nil {
		return err
	}
	s, err := p2pStateOf(l.op, td)
	if err != nil {
		return l.errorf("%w", err)
	}
	defer s.mu.Unlock()
	if err := s.prepare(l); err != nil {
		return l.errorf("%w", err)
	}
	l.logStart(int64(s.total), s.tag0)
	s.held = lockTags(s.held, l.c, l.peer, false, s.tagSet)
	err = s.send(l)
	unlockAll(s.held)
	if err != nil {
		return l.errorf("%w", err)
	}
	return nil
}

// prepare computes the tags of a transfer with l's options: s.cur holds
// the per-message tags (nil in consolidated mode), s.tag0 the tag of the
// header and s.tagSet the distinct tags.
func (s *p2pState) prepare(l *link) error {
	if l.o.consolidated {
		s.cur, s.tag0 = nil, l.o.tag
		s.tagSet = append(s.tagSet[:0], l.o.tag)
		return nil
	}
	if s.contiguous != nil {
		return fmt.Errorf("key %v is not contiguous; call Contiguous first", s.contiguous)
	}
	tags, err := s.leafTags(l.o.tag, l.o.pseudoRand)
	if err != nil {
		return err
	}
	s.cur, s.tag0 = tags, headerTag(tags, l.o.tag)
	if len(tags) == 0 {
		s.tagSet = append(s.tagSet[:0], s.tag0)
	} else {
		s.tagSet = tagSet(s.tagSet, tags)
	}
	return nil
}

// header returns the header of a transfer of s with l's options.
func (s *p2pState) header(l *link) wire.Header {
	h := wire.Header{Kind: wire.KindSend, Total: int64(s.total), MetaLen: int64(len(s.meta)), Leaves: int64(len(s.leaves))}
	if l.o.consolidated {
		h.Flags, h.PayloadTag, h.Hash = wire.FlagConsolidated, l.o.tag, s.consHash
		if s.total <= p2pInlineMax {
			h.Flags |= wire.FlagInline
		} else {
			h.Chunk = wire.MaxChunk
		}
		return h
	}
	h.Flags, h.PayloadTag, h.Hash = wire.FlagPerLeaf, l.o.tag, s.sortedHash
	if l.o.pseudoRand {
		h.Flags |= wire.FlagPseudoRandTags
	}
	return h
}

// send runs a blocking transfer; the caller holds the send locks.
func (s *p2pState) send(l *link) error {
	h := s.header(l)
	var payload []byte
	if l.o.consolidated {
		var err error
		if payload, err = s.payload(true); err != nil {
			return err
		}
	}
	wire.Put(s.hdr, &h)
	if err := mpi.Send(l.c, s.hdr, l.peer, s.tag0); err != nil {
		return fmt.Errorf("sending the header: %w", err)
	}
	inline := h.Flags&wire.FlagInline != 0
	body := s.sendBody(inline)
	if inline {
		copy(body[len(s.meta):], payload)
	}
	if err := mpi.Send(l.c, body, l.peer, s.tag0); err != nil {
		return fmt.Errorf("sending the metadata: %w", err)
	}
	if l.o.consolidated {
		if !inline {
			return sendChunks(l.c, payload, l.peer, s.tag0)
		}
		return nil
	}
	for i, j := range s.sorted {
		lf := &s.leaves[j]
		b, err := lf.t.Bytes()
		if err == nil {
			err = mpi.Send(l.c, b, l.peer, s.cur[i])
		}
		if err != nil {
			return fmt.Errorf("key %v: %w", lf.key, err)
		}
	}
	return nil
}

// Recv receives into td's tensor leaves what rank src of the group sends
// with Send (or ISend), as tensordict's recv, and returns the last tag
// used. Options: WithGroup, WithContext, WithTag, WithPseudoRandTags,
// WithConsolidated, which must match the sender's.
//
// The data lands in td's existing tensors (a memory-mapped leaf receives
// straight into its file). With WithConsolidated, a consolidated td (the
// result of FromRemoteInit) receives the whole storage with one receive
// and no allocation; a td that is not consolidated receives into a buffer
// kept for later calls and copies into its leaves. Non-tensor values are
// not transferred.
//
// If the sender's keys, dtypes or shapes differ from td's, Recv returns an
// error wrapping ErrMismatch that names the first differing key; the
// sender's data is consumed and discarded, so the sender does not hang,
// and td is left unchanged. The same holds for a sender over WithMaxBytes
// (the error wraps wire.ErrLimit). Exactly the messages the sender's
// header announces are discarded, so a later transfer on the same tags is
// received intact; each is awaited at most 2 s, in case the header lies.
// With WithContext, a Recv whose sender has not
// started when the context ends returns an error wrapping ctx.Err(); once
// the header has arrived, the transfer runs to its end.
//
// A Recv takes its transfer after those of the IRecvs called before it
// from src on one of its tags, which it steps while it waits for them (see
// IRecv); pending IRecvs also proceed while a Recv waits for its messages.
func (td *TensorDict) Recv(src int, opts ...RecvOption) (int, error) {
	tag, err := td.recv(src, opts)
	return tag, logFailed("Recv", err)
}

func (td *TensorDict) recv(src int, opts []RecvOption) (int, error) {
	lv, err := newLink("Recv", src, "from", resolve(opts, usesRecv))
	l := &lv
	if err != nil {
		return 0, err
	}
	s, err := recvState(l, td)
	if err != nil {
		if errors.Is(err, tensor.ErrReleased) {
			err = errors.Join(err, l.refuseIncoming())
		}
		return 0, l.errorf("%w", err)
	}
	defer s.mu.Unlock()
	l.logStart(int64(s.total), s.tag0)
	s.held = lockTags(s.held, l.c, l.peer, true, s.tagSet)
	r := recvOp{l: l, td: td, s: s}
	_, err = r.advance(true)
	unlockAll(s.held)
	if err != nil {
		return 0, l.errorf("%w", err)
	}
	return r.tag, nil
}

// refuseIncoming consumes the transfer that a Recv into a TensorDict
// whose storage was released cannot take, so that its sender is not left
// blocked in a send nobody will ever receive: it waits for the header on
// the tag the options give, until the context ends or, without a deadline,
// for drainIdle, and drains exactly what the header announces.
func (l *link) refuseIncoming() error {
	tag0 := l.o.tag
	if l.o.pseudoRand && !l.o.consolidated {
		tag0 = IntGenerator(tag0)
	}
	ctx := l.o.ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, drainIdle)
		defer cancel()
	}
	var hdr [wire.Size]byte
	if err := recvExact(ctx, l.c, hdr[:], l.peer, tag0); err != nil {
		if ctx.Err() != nil {
			return nil // nothing came: nothing to refuse
		}
		return fmt.Errorf("refusing the incoming transfer: %w", err)
	}
	h, err := wire.Parse(hdr[:], wire.Limits{MaxTotal: math.MaxInt64})
	if err != nil || h.Kind != wire.KindSend {
		return nil // announces nothing that can be trusted
	}
	if err := l.drainSend(&h, tag0, true, 0); err != nil {
		return fmt.Errorf("refusing the incoming transfer: %w", err)
	}
	return nil
}

// drainUnlessDone drains what the sender of h still sends after the first
// from payload messages (see drainSend), unless l's context has ended: then
// the receive gives up at once, and the rest of the transfer stays queued
// on tags that no later transfer of this structure will take as its own
// (the sender is expected to give up by its own deadline).
func (l *link) drainUnlessDone(h *wire.Header, tag0 int, from int64) error {
	if l.o.ctx.Err() != nil {
		return nil
	}
	return l.drainSend(h, tag0, false, from)
}

// parseHeader parses the fixed-size header received into s.hdr. A header
// over this side's limits is drained as far as it can be trusted.
func (s *p2pState) parseHeader(l *link) (wire.Header, error) {
	h, err := wire.Parse(s.hdr, l.o.limits())
	if err != nil {
		// A header over this side's limits still tells what the sender
		// sends after it; one that cannot be read at all tells nothing.
		if all, perr := wire.Parse(s.hdr, wire.Limits{MaxTotal: math.MaxInt64}); perr == nil && all.Kind == wire.KindSend {
			err = errors.Join(err, l.drainSend(&all, s.tag0, true, 0))
		}
		return wire.Header{}, err
	}
	if h.Kind != wire.KindSend {
		return wire.Header{}, fmt.Errorf("%w: received a %v header, want %v", ErrMismatch, h.Kind, wire.KindSend)
	}
	return h, nil
}

// check compares the sender's header and metadata with s.
func (s *p2pState) check(l *link, td *TensorDict, h *wire.Header, body []byte) error {
	perLeaf := h.Flags&wire.FlagPerLeaf != 0
	switch {
	case perLeaf && l.o.consolidated:
		return fmt.Errorf("%w: the sender sent one message per leaf, this side expects a consolidated storage (WithConsolidated)", ErrMismatch)
	case !perLeaf && !l.o.consolidated:
		return fmt.Errorf("%w: the sender sent a consolidated storage (WithConsolidated), this side expects one message per leaf", ErrMismatch)
	}
	want := s.consHash
	if perLeaf {
		want = s.sortedHash
	}
	if h.Hash != want || h.Leaves != int64(len(s.leaves)) || (!perLeaf && h.Total != int64(s.total)) {
		return s.mismatch(td, body[h.ClassLen:int64(h.ClassLen)+h.MetaLen], h, perLeaf)
	}
	if pseudo := h.Flags&wire.FlagPseudoRandTags != 0; perLeaf && (h.PayloadTag != l.o.tag || pseudo != l.o.pseudoRand) {
		return fmt.Errorf("%w: the sender's tags start at %d (pseudo-random %v), this side's at %d (pseudo-random %v)",
			ErrMismatch, h.PayloadTag, pseudo, l.o.tag, l.o.pseudoRand)
	}
	return nil
}

// mismatch explains how the sender's structure (meta) differs from td's.
func (s *p2pState) mismatch(td *TensorDict, meta []byte, h *wire.Header, sorted bool) error {
	theirs, err := codec.MetaStructure(meta)
	if err != nil {
		return fmt.Errorf("%w: the sender's metadata is unreadable: %w", ErrMismatch, err)
	}
	mine := structureOf(td)
	if sorted {
		mine, theirs = mine.Sorted(), theirs.Sorted()
		theirs.Batch = mine.Batch
	}
	if err := codec.Diff(theirs, mine); err != nil {
		return fmt.Errorf("%w: sender vs receiver: %w", ErrMismatch, err)
	}
	return fmt.Errorf("%w: same keys, dtypes and shapes, but the consolidated layouts differ (%d bytes sent, %d here)", ErrMismatch, h.Total, s.total)
}

// drainSend consumes what a Send transfer this side refused still owes,
// exactly as its header h announces, so that the sender does not hang and
// no message of it is left for a later Recv: the metadata message on tag0
// when body is true (it was not received), then the storage chunks
// (consolidated) or the per-leaf messages from the from-th on, on the
// sender's tags (see drainMessages).
func (l *link) drainSend(h *wire.Header, tag0 int, body bool, from int64) error {
	if body {
		if err := drainChunks(l.c, l.peer, tag0, 1); err != nil {
			return err
		}
	}
	if h.Flags&wire.FlagPerLeaf == 0 {
		return drainChunks(l.c, l.peer, tag0, h.Chunks())
	}
	pseudo := h.Flags&wire.FlagPseudoRandTags != 0
	tag := h.PayloadTag - 1
	next := func() int {
		if pseudo {
			tag = IntGenerator(tag + 1)
		} else {
			tag++
		}
		return tag
	}
	for range min(from, h.Leaves) {
		next()
	}
	return drainMessages(l.c, l.peer, h.Leaves-min(from, h.Leaves), func(int64) int { return next() })
}
