// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// MaxUserTag bounds the per-leaf tags of Send, Recv, ISend and IRecv: they
// must lie in [0, MaxUserTag). Pseudo-random tags lie in [0, 10000).
const MaxUserTag = group.MaxUserTag

// p2pInlineMax is the largest consolidated storage Send puts in the
// metadata message instead of a message of its own, to a rank of the same
// node; remoteInlineMax to a rank of another node (group.SameNode).
//
// Between nodes every message costs its own latency (Open MPI's TCP
// transport: 16 raw messages of 64 B took 90 us one way, 5.6 us each),
// and a contiguous storage gains nothing by travelling alone, as it does
// within a node (a single copy, see storageTravel). Between two nodes of the
// local cluster (tdmpi bench, two alternating pairs), consolidated
// Send/Recv took 1.36-1.46x raw at 32 KiB, 1.37-1.38x at 64 KiB and
// 1.15-1.30x at 128 KiB with the storage apart, and 1.02-1.09x,
// 0.84-0.86x and 0.89-1.04x in the header message. A build that put
// every storage in it lost at 256 and 512 KiB (1.26-1.34x against
// 1.08-1.23x apart, 1.15-1.18x against 1.04-1.08x). A receiver takes
// either layout: the limit is the sender's alone.
const (
	p2pInlineMax    = 16 << 10
	remoteInlineMax = 128 << 10
)

// inlineMax returns the largest storage a consolidated Send of s over l
// puts in its header message: remoteInlineMax when l's peer is on another
// node, else p2pInlineMax. A storage within p2pInlineMax does not ask.
func (s *p2pState) inlineMax(l *link) int {
	if s.total <= p2pInlineMax || l.Group.SameNode(l.Peer) {
		return p2pInlineMax
	}
	return remoteInlineMax
}

// storageTravel reports how a storage of total bytes travels after a
// header message of head bytes (the header, a class name, metadata), for
// Send and for a blocking InitRemote: copied into the header message when
// the whole is one eager message (xfer.EagerSendMax); in the header
// message but read where it lies, the two sent in two blocks (joined,
// mpix.SendConcat), when the whole is longer and the storage is over that
// but at most most bytes; otherwise as a message of its own.
//
// Two blocks save the copy, and Open MPI moves a message that is not
// contiguous through shared-memory fragments, 1.5-2x faster than the
// single copy (CMA) of a contiguous rendezvous on this machine:
// consolidated Send/Recv of 4-16 KiB went from 1.29-1.49x the time of a
// raw mpi.Send of the same bytes to 0.71-0.79x (tdmpi bench, both
// families). A storage that MPI moves eagerly on its own, but that the
// header would push past the limit, travels apart: under MPICH,
// consolidated Send/Recv of 8 KiB then took 2.3 us one way, 1.3x raw,
// against 4.65 us (2.6x) as one message in two blocks; under Open MPI, at
// 3968 bytes, the same either way (1.34-1.40x).
func storageTravel(head, total, most int) (copied, joined bool) {
	limit := xfer.EagerSendMax()
	switch {
	case total == 0 || head+total <= limit:
		return true, false
	case total <= limit || total > most:
		return false, false
	}
	return false, true
}

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
// Unlike tensordict, every transfer starts with one message on the first
// leaf's tag: a fixed-size header carrying a hash of the structure, then
// the metadata (and the storage itself, with WithConsolidated, when it is
// at most 16 KiB, or 128 KiB to a rank on another node: the whole
// transfer is then one message). A receiver
// with a different structure therefore refuses the transfer instead of
// hanging or reading garbage. The metadata, which lets it name the first
// differing key, travels with td's first transfer of a structure to dst
// on a tag; the later ones carry the header alone (64 bytes, with an
// inline storage after it), which MPI sends faster, and a mismatch found
// by the hash is reported without the key. Encodings and buffers are kept
// with td between calls: once a structure has been sent, Sends with
// WithConsolidated allocate nothing.
//
// Concurrent transfers between the same two ranks must use different tags
// (WithTag); transfers on the same tags are serialized.
//
// With WithContext, a Send whose context has already ended returns an
// error wrapping ctx.Err() and sends nothing. Otherwise the whole
// transfer is posted at once (MPI_Isend, in Send's order) and awaited,
// polling, until it completes or the context ends; waiting for another
// transfer of td or on the same tags is bounded too. A send MPI has
// started cannot be recalled, so a Send given up when the context ends
// returns an error wrapping ctx.Err() and leaves the rest of the transfer
// queued in MPI, complete: the receiver sees nothing of it until it calls
// Recv, and then receives it whole (never a header without its leaves),
// as the first transfer on those tags; a later Send on the same tags is
// received after it, intact. Until the receiver takes it, MPI still reads
// the transfer's memory: a storage the Send packed (WithConsolidated on a
// td that is not consolidated) is the transfer's own and arrives as it
// was, but per-leaf messages and a consolidated td's storage are td's own
// tensors, which arrive as they are when MPI reads them, so change them
// only once the receiver has received, and do not release their storage
// before (MPI would read freed memory). Package mpi completes the given-up
// sends as MPI lets it, and group.Finalize
// refuses with mpi.ErrBusy while a receiver has not taken them. Without a
// context that can end, Send makes blocking sends and allocates nothing
// in the steady state; with one, it allocates a request per message.
//
// Without a context that can end, a Send to a rank that leaves the group
// (its group.Finalize) without receiving does not wait forever: messages
// that MPI sends without the receiver (up to 4 KiB, 8 KiB under MPICH)
// are sent, and a larger one returns an error wrapping group.ErrPeerLeft
// naming the rank, about a second after it left, the message given up
// as above (MPI keeps reading its memory).
//
// MPI reads the messages in C, where a fault cannot be caught: a
// memory-mapped leaf or storage whose file another process truncated
// makes Send fail before it sends anything, with an error wrapping
// memmap.ErrFault (see LoadMemmap).
func (td *TensorDict) Send(dst int, opts ...SendOption) error {
	return xfer.LogFailed("Send", td.send(dst, opts))
}

func (td *TensorDict) send(dst int, opts []SendOption) error {
	var lv link // on the stack: see link.init
	l := &lv
	resolveInto(&l.o, opts, usesSend)
	if err := l.init("Send", dst, "to"); err != nil {
		return err
	}
	// A context that cannot end (the default) is not asked again.
	blocking := l.Ctx.Done() == nil
	if !blocking {
		if err := l.NotStarted(); err != nil {
			return err
		}
	}
	s, err := lockState(l, td)
	if err != nil {
		return l.Errorf("%w", err)
	}
	defer s.mu.Unlock()
	if err := s.prepare(l); err != nil {
		return l.Errorf("%w", err)
	}
	l.LogStart(int64(s.total), s.tag0)
	if blocking {
		s.sendHeld.Lock(l.Group, l.Peer, false, s.tagSet)
	} else if err := s.sendHeld.LockCtx(&l.Link, false, s.tagSet); err != nil {
		return l.Errorf("%w", err)
	}
	err = s.send(l, blocking)
	s.sendHeld.Unlock()
	if err != nil {
		return l.Errorf("%w", err)
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
	s.cur, s.tag0 = tags, xfer.HeaderTag(tags, l.o.tag)
	if len(tags) == 0 {
		s.tagSet = append(s.tagSet[:0], s.tag0)
	} else {
		s.tagSet = xfer.TagSet(s.tagSet, tags)
	}
	return nil
}

// header returns the header of a transfer of s with l's options, without
// the metadata when it is described (see p2pState.described).
func (s *p2pState) header(l *link) wire.Header {
	h := wire.Header{Kind: wire.KindSend, Total: int64(s.total), MetaLen: int64(len(s.meta)), Leaves: int64(len(s.leaves))}
	if s.described(l) {
		h.Flags, h.MetaLen = wire.FlagDescribed, 0
	}
	if l.o.consolidated {
		h.Flags |= wire.FlagConsolidated
		h.PayloadTag, h.Hash = l.o.tag, s.consHash
		if copied, joined := storageTravel(wire.Size+int(h.MetaLen), s.total, s.inlineMax(l)); copied || joined {
			h.Flags |= wire.FlagInline
		} else {
			h.Chunk = wire.MaxChunk
		}
		return h
	}
	h.Flags |= wire.FlagPerLeaf
	h.PayloadTag, h.Hash = l.o.tag, s.sortedHash
	if l.o.pseudoRand {
		h.Flags |= wire.FlagPseudoRandTags
	}
	return h
}

// send runs a transfer bounded by l's context (see link.sendMessages),
// blocking when that context cannot end; the caller holds the send locks.
func (s *p2pState) send(l *link, blocking bool) error {
	var h holds
	if err := s.hold(&h); err != nil {
		return err
	}
	msgs, tags, joined, err := s.messages(l, false, blocking)
	var gone bool
	switch {
	case err != nil:
	case joined:
		// One message in two blocks (see messages); given up only if
		// the peer leaves.
		gone, err = l.SendJoined(msgs[0], msgs[1], tags[0], s.messageName)
	default:
		gone, err = l.SendMessages(msgs, tags, s.messageName)
	}
	if gone {
		s.detach()
	}
	clear(msgs) // no reference to td's memory stays in s
	h.End(err)
	return err
}

// messages returns the messages of a transfer of s with l's options, in
// order, and the tag of each: the header message (the header, the
// metadata, and the storage when it travels inline), then the storage in
// chunks (consolidated) or one message per leaf in tensordict's order.
// With own, the header message and a staged storage are new buffers that
// belong to the transfer (an ISend, which outlives the lock of s);
// otherwise they are the buffers of s. The slices returned are s's, reused
// by the next call.
//
// With join, an inline storage that storageTravel joins is not copied:
// msgs[0] is the header message without it,
// msgs[1] the storage itself, and joined reports that the two are one
// message (mpix.SendConcat).
//
// Memory-mapped leaves and storages are checked first (mem.Readable): a
// page of a file that another process truncated would end the process
// with SIGBUS inside MPI's C code, so such a transfer fails before it
// starts, with an error wrapping memmap.ErrFault. A fault while packing a
// staged storage is the same error.
func (s *p2pState) messages(l *link, own, join bool) (msgs [][]byte, tags []int, joined bool, err error) {
	h := s.header(l)
	inline, described := h.Flags&wire.FlagInline != 0, h.Flags&wire.FlagDescribed != 0
	if inline && join && !own {
		_, joined = storageTravel(wire.Size+int(h.MetaLen), s.total, s.inlineMax(l))
	}
	defer func() { s.msgs, s.mtags = msgs[:0], tags[:0] }()
	// One header message: the header, the metadata (unless described)
	// and, inline, the storage.
	frame := s.sendFrame(&h, inline && !joined)
	body := frame[wire.Size:]
	msgs, tags = append(s.msgs[:0], frame), append(s.mtags[:0], s.tag0)
	if !l.o.consolidated {
		for i, j := range s.sorted {
			lf := &s.leaves[j]
			b, err := lf.t.Bytes()
			if err == nil {
				err = s.readable(b)
			}
			if err != nil {
				return nil, nil, false, fmt.Errorf("key %v: %w", lf.key, err)
			}
			msgs, tags = append(msgs, b), append(tags, s.cur[i])
		}
		if own {
			msgs[0] = xfer.AlignedCopy(msgs[0])
		}
		if !described {
			s.markDescribed(l)
		}
		return msgs, tags, false, nil
	}
	// One fault check covers packing, the inline copy, or (when MPI reads
	// the storage in C) a touch of its last byte, as mem.Readable does.
	var payload []byte
	err = s.guard(func() (err error) {
		if payload, err = s.payload(true); err != nil {
			return err
		}
		if inline && !joined {
			copy(body[h.MetaLen:], payload)
		} else {
			mem.ReadLast(payload)
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("the consolidated storage: %w", err)
	}
	switch {
	case joined:
		msgs, tags = append(msgs, payload), append(tags, s.tag0)
	case inline:
		// In the header message, copied above.
	case own && s.st == nil:
		// The staging buffer is reused by the next call.
		payload = xfer.AlignedCopy(payload)
		fallthrough
	default:
		msgs, tags = xfer.AppendChunks(msgs, tags, payload, s.tag0)
	}
	if own {
		msgs[0] = xfer.AlignedCopy(msgs[0])
	}
	if !described {
		s.markDescribed(l)
	}
	return msgs, tags, joined, nil
}

// messageName names message i of a transfer of s (see messages) in errors.
func (s *p2pState) messageName(i int) string {
	switch {
	case i == 0:
		return "the header"
	case s.cur == nil:
		return fmt.Sprintf("storage chunk %d", i)
	case i-1 < len(s.sorted):
		return fmt.Sprintf("key %v", s.leaves[s.sorted[i-1]].key)
	}
	return fmt.Sprintf("message %d", i+1)
}

// detach gives up the message buffers of s to a transfer that MPI still
// holds (a Send given up when its context ended): later transfers use new
// buffers instead of overwriting what MPI may still read.
func (s *p2pState) detach() {
	s.out = nil
	if s.st == nil {
		s.stage = nil
	}
}

// abandonRecv records that a receive into s's TensorDict was left to MPI
// (xfer.ErrAbandoned): the buffers of s that MPI may still write (the
// metadata buffer, the staging buffer) are dropped, for package mpi to
// keep until the receive completes, and every later transfer of the
// TensorDict is refused (see refresh), since MPI may still write its
// leaves.
func (s *p2pState) abandonRecv() {
	s.rbody, s.abandoned = nil, true
	if s.st == nil {
		s.stage = nil
	}
}

// Recv receives into td's tensor leaves what rank src of the group sends
// with Send (or ISend), as tensordict's recv, and returns the last tag
// used. Options: WithGroup, WithContext, WithTag, WithPseudoRandTags,
// WithConsolidated, which must match the sender's. src may be AnySource:
// the transfer then comes whole from the first rank whose header matches,
// which td.Source names after.
//
// The data lands in td's existing tensors (a memory-mapped leaf receives
// straight into its file). With WithConsolidated, a consolidated td (the
// result of FromRemoteInit) receives the whole storage with one receive
// and no allocation; a td that is not consolidated receives into a buffer
// kept for later calls and copies into its leaves.
//
// Non-tensor values arrive too, in both modes: after a Recv, td holds the
// sender's non-tensor values (those td lacks are added; td's others are
// left as they are), also into a locked td. The sender sends them only
// when they are new to this rank on that tag and mode: with its first
// transfer of a structure there, and with the first after a change of
// its values (a SetNonTensor, say), so the steady state stays one message.
// This side keeps the last values that came from each rank, tag and mode,
// and gives them to every TensorDict that receives from there: a td that
// takes turns receiving from several ranks (AnySource) holds the values of
// the last sender. A TensorDict whose sender's values never came to this
// rank (it described them to another of its TensorDicts, whose values
// have been replaced since) keeps its own. A sender's value that td cannot
// hold (td has a tensor or a nested TensorDict under that key, or lacks
// the nested TensorDict that holds it) fails the Recv, after its tensors
// were received, with an error wrapping ErrMismatch that names the key.
//
// If the sender's keys, dtypes or shapes differ from td's, Recv returns an
// error wrapping ErrMismatch that names the first differing key; the
// sender's data is consumed and discarded, so the sender does not hang,
// and td is left unchanged. The same holds for a sender over WithMaxBytes
// (the error wraps wire.ErrLimit). Exactly the messages the sender's
// header announces are discarded, so a later transfer on the same tags is
// received intact; each is awaited at most 2 s, in case the header lies.
// With WithContext, a Recv whose sender has not started, or stalls, when
// the context ends returns an error wrapping ctx.Err(). If MPI was already
// writing a large message (a leaf, or a chunk of the consolidated storage)
// into td, that receive cannot be recalled: the error also wraps
// ErrReceiveAbandoned, td's leaves may still be written by MPI until the
// message completes (if ever) and hold no defined data, and every later
// Send, Recv, ISend or IRecv of td returns an error wrapping
// ErrReceiveAbandoned: drop td and receive into a new TensorDict.
// A sender that gave up a Send at its own deadline (see Send) still
// delivers the whole transfer: Recv takes it as any other. A
// memory-mapped leaf (or storage) of td whose file another process
// truncated is refused before MPI writes into it, with an error wrapping
// memmap.ErrFault; the transfer is drained as a refused one.
//
// A Recv takes its transfer after those of the IRecvs called before it
// from src on one of its tags, which it steps while it waits for them (see
// IRecv); pending IRecvs also proceed while a Recv waits for its messages.
func (td *TensorDict) Recv(src int, opts ...RecvOption) (int, error) {
	tag, err := td.recv(src, opts)
	return tag, xfer.LogFailed("Recv", err)
}

func (td *TensorDict) recv(src int, opts []RecvOption) (int, error) {
	var lv link // on the stack: see link.init
	l := &lv
	resolveInto(&l.o, opts, usesRecv)
	if err := l.init("Recv", src, "from"); err != nil {
		return 0, err
	}
	s, err := recvState(l, td)
	if err != nil {
		if errors.Is(err, tensor.ErrReleased) {
			err = errors.Join(err, l.refuseIncoming())
		}
		return 0, l.Errorf("%w", err)
	}
	defer s.mu.Unlock()
	l.LogStart(int64(s.total), s.tag0)
	if err := s.recvHeld.LockCtx(&l.Link, true, s.tagSet); err != nil {
		return 0, l.Errorf("%w", err)
	}
	// The receive runs on a copy of the link kept in s, so that lv stays
	// on the stack: a large receive with a context hands its buffer (r.dst)
	// to MPI, which escape analysis takes as r's whole content.
	s.rlink = lv
	r := recvOp{l: &s.rlink, td: td, s: s}
	_, err = r.advance(true)
	l.Peer = s.rlink.Peer // the sender, once known (AnySource)
	s.rlink = link{}
	s.recvHeld.Unlock()
	if err == nil {
		err = s.takeValues(l, td)
	}
	if err != nil {
		return 0, l.Errorf("%w", err)
	}
	td.receivedFrom(l.Peer)
	return r.tag, nil
}

// refuseIncoming consumes the transfer that a Recv into a TensorDict
// whose storage was released cannot take, so that its sender is not left
// blocked in a send nobody will ever receive: it waits for the header on
// the tag the options give, until the context ends or, without a deadline,
// for xfer.DrainIdle, and drains exactly what the header announces.
func (l *link) refuseIncoming() error {
	tag0 := l.o.tag
	if l.o.pseudoRand && !l.o.consolidated {
		tag0 = xfer.IntGenerator(tag0)
	}
	ctx := l.Ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, xfer.DrainIdle)
		defer cancel()
	}
	var hdr [wire.Size]byte
	var scratch []byte
	lc := *l
	lc.Ctx = ctx
	frame, err := lc.recvHeaderMessage(tag0, hdr[:], &scratch)
	if err != nil {
		if ctx.Err() != nil {
			return nil // nothing came: nothing to refuse
		}
		return fmt.Errorf("refusing the incoming transfer: %w", err)
	}
	h, err := wire.Parse(hdr[:], wire.Limits{MaxTotal: math.MaxInt64})
	if err != nil || h.Kind != wire.KindSend {
		return nil // announces nothing that can be trusted
	}
	if err := lc.DrainSend(&h, tag0, frame == nil && h.Body() > 0, 0); err != nil {
		return fmt.Errorf("refusing the incoming transfer: %w", err)
	}
	return nil
}

// drainUnlessDone drains what the sender of h still sends after the first
// from payload messages (see xfer.Link.DrainSend), unless l's context has ended: then
// the receive gives up at once, and the rest of the transfer stays queued
// on tags that no later transfer of this structure will take as its own
// (the sender is expected to give up by its own deadline).
func (l *link) drainUnlessDone(h *wire.Header, tag0 int, from int64) error {
	if l.Ctx.Err() != nil {
		return nil
	}
	return l.DrainSend(h, tag0, false, from)
}

// parseHeader parses the fixed-size header received into s.hdr. A header
// over this side's limits is drained as far as it can be trusted: its
// metadata message too when body is true (the header came alone).
func (s *p2pState) parseHeader(l *link, body bool) (wire.Header, error) {
	h, err := wire.Parse(s.hdr, l.o.limits())
	if err != nil {
		// A header over this side's limits still tells what the sender
		// sends after it; one that cannot be read at all tells nothing.
		if all, perr := wire.Parse(s.hdr, wire.Limits{MaxTotal: math.MaxInt64}); perr == nil && all.Kind == wire.KindSend {
			err = errors.Join(err, l.DrainSend(&all, s.tag0, body && all.Body() > 0, 0))
		} else if perr != nil {
			err = fmt.Errorf("%w (%s)", err, l.notHeader(s.tag0))
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
	if h.Flags&wire.FlagDescribed != 0 {
		mine := s.consHash
		if sorted {
			mine = s.sortedHash
		}
		return fmt.Errorf("%w: the sender's structure (hash %#016x, %d leaves, %d bytes) is not this side's (hash %#016x, %d leaves, %d bytes); "+
			"the sender sends its metadata, which names the first differing key, only with its first transfer of a structure to this rank on tag %d",
			ErrMismatch, h.Hash, h.Leaves, h.Total, mine, len(s.leaves), s.total, s.tag0)
	}
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

// recvPhase is the next message a receive takes.
type recvPhase uint8

const (
	phaseHeader recvPhase = iota // the fixed-size header, on tag0
	phaseBody                    // the metadata (with an inline storage), on tag0
	phaseLeaves                  // per-leaf messages, leaf i on s.cur[i]
	phaseChunks                  // consolidated storage chunks on tag0, from byte i
	phaseDone
)

// recvOp is one receive of a Send transfer into td, taken one message at a
// time: Recv runs it to its end at once, IRecv a step at a time as its
// messages arrive. The caller holds s and its receive locks (s.recvHeld).
type recvOp struct {
	l     *link
	td    *TensorDict
	s     *p2pState
	h     wire.Header
	phase recvPhase
	i     int    // next leaf (phaseLeaves) or chunk offset (phaseChunks)
	dst   []byte // consolidated storage being received (phaseChunks)
	tag   int    // the last tag, once done
}

// ready reports whether the next message, on tag, may be received now:
// always when block (the receive then waits as the context allows), and
// otherwise when it has arrived or the context has ended (the receive then
// returns the context's error unless the message has just come, as a
// blocking receive would) or the xfer.Probe fails (the receive reports it).
func (r *recvOp) ready(tag int, block bool) bool {
	if block || r.l.Ctx.Err() != nil {
		return true
	}
	return r.l.Arrived(tag)
}

// advance receives the transfer's messages in order, until the end (done)
// or, unless block, until the next one has not arrived yet (not done, nil
// error). An error ends the receive (done): the messages its sender still
// owes are drained first, except once the context has ended, as Recv
// documents.
func (r *recvOp) advance(block bool) (done bool, err error) {
	done, err = r.step(block)
	if err != nil && errors.Is(err, xfer.ErrAbandoned) {
		r.s.abandonRecv()
	}
	return done, err
}

// step is advance but for an abandoned receive.
func (r *recvOp) step(block bool) (done bool, err error) {
	l, s := r.l, r.s
	for {
		switch r.phase {
		case phaseHeader:
			if !r.ready(s.tag0, block) {
				return false, nil
			}
			frame, err := s.recvHeader(l)
			if err != nil {
				return true, err
			}
			if frame == nil {
				// The header alone: its body, if any, follows in a
				// message of its own.
				if r.h, err = s.parseHeader(l, true); err != nil {
					return true, err
				}
				if r.h.Body() > 0 {
					r.phase = phaseBody
					continue
				}
				if done, err := r.gotBody(nil); done || err != nil {
					return done, err
				}
				continue
			}
			// The header and the metadata (and an inline storage) in one message.
			if r.h, err = s.parseHeader(l, false); err != nil {
				return true, err
			}
			if int64(len(frame)) != wire.Size+r.h.Body() {
				return true, fmt.Errorf("header message of %d bytes, its header announces %d: %w", len(frame), wire.Size+r.h.Body(), wire.ErrHeader)
			}
			if done, err := r.gotBody(frame[wire.Size:]); done || err != nil {
				return done, err
			}
		case phaseBody:
			if !r.ready(s.tag0, block) {
				return false, nil
			}
			h := &r.h
			body := s.recvBody(int(h.Body()))
			if err := xfer.RecvExact(l.Ctx, l.Comm, body, l.Peer, s.tag0); err != nil {
				return true, fmt.Errorf("receiving the metadata: %w", errors.Join(err, l.drainUnlessDone(h, s.tag0, 0)))
			}
			if done, err := r.gotBody(body); done || err != nil {
				return done, err
			}
		case phaseLeaves:
			if r.i == len(s.sorted) {
				r.tag = l.o.tag - 1
				if n := len(s.cur); n > 0 {
					r.tag = s.cur[n-1]
				}
				r.phase = phaseDone
				return true, nil
			}
			lf := &s.leaves[s.sorted[r.i]]
			b, err := lf.t.Bytes()
			if err == nil {
				err = s.readable(b) // MPI's C code writes it (see messages)
			}
			if err != nil {
				// Released or truncated storage, say: message i is still to come.
				return true, fmt.Errorf("key %v: %w", lf.key, errors.Join(err, l.drainUnlessDone(&r.h, s.tag0, int64(r.i))))
			}
			if !r.ready(s.cur[r.i], block) {
				return false, nil
			}
			if err := holding(lf.t.Storage(), func() error { return xfer.RecvExact(l.Ctx, l.Comm, b, l.Peer, s.cur[r.i]) }); err != nil {
				return true, fmt.Errorf("key %v: %w", lf.key, errors.Join(err, l.drainUnlessDone(&r.h, s.tag0, int64(r.i+1))))
			}
			r.i++
		case phaseChunks:
			if r.i >= len(r.dst) {
				r.tag, r.phase, r.dst = s.tag0, phaseDone, nil
				return true, s.unstaged()
			}
			if !r.ready(s.tag0, block) {
				return false, nil
			}
			if err := holding(s.st, func() error { return xfer.RecvChunk(l.Ctx, l.Comm, r.dst, r.i, l.Peer, s.tag0) }); err != nil {
				return true, err
			}
			r.i += wire.MaxChunk
		default:
			return true, nil
		}
	}
}

// recvHeader receives the header message of a transfer of s (see
// recvHeaderMessage), the header into s.hdr, a whole frame into s.rbody.
func (s *p2pState) recvHeader(l *link) (frame []byte, err error) {
	return l.recvHeaderMessage(s.tag0, s.hdr, &s.rbody)
}

// recvHeaderMessage receives the header message of a Send transfer on
// tag: the header alone, into hdr (frame nil), or the header followed by
// the metadata (and the storage when it travels inline), into *scratch,
// grown as needed (frame). Its size is checked before anything is
// received: a message over this side's limits (or shorter than a header)
// is discarded. len(*scratch) is the size of the last frame (0: the last
// message was a header alone); a message of that size, the steady state,
// is probed and received in one call (recvSized).
func (l *link) recvHeaderMessage(tag int, hdr []byte, scratch *[]byte) (frame []byte, err error) {
	most := l.o.limits().MaxFrame(remoteInlineMax) // either layout (see inlineMax)
	guess := hdr
	if n := len(*scratch); n > 0 && int64(n) <= most {
		guess = *scratch
	}
	b, _, err := l.RecvSized(tag, most, 0, guess,
		func(n int) ([]byte, []byte, error) {
			if n == wire.Size {
				return hdr, nil, nil
			}
			if cap(*scratch) < n {
				*scratch = xfer.AlignedBuf(n)
			}
			return (*scratch)[:n], nil, nil
		},
		func(head []byte, n int64) error { return l.refuseHeaderMessage(head, tag, n, most) })
	if err != nil {
		if l.Ctx.Err() != nil {
			err = fmt.Errorf("%w%s", err, l.waitsElsewhere(tag))
		}
		return nil, err
	}
	if len(b) == wire.Size && &b[0] == &hdr[0] { // the header alone
		*scratch = (*scratch)[:0]
		return nil, nil
	}
	*scratch = b
	copy(hdr, b)
	return b, nil
}

// refuseHeaderMessage refuses a Send header message of n bytes on tag,
// outside [wire.Size, most], which recvSized consumed (head is its start),
// and drains what its header announces beyond it when the header is
// readable, as for any refused transfer.
func (l *link) refuseHeaderMessage(head []byte, tag int, n, most int64) error {
	err := fmt.Errorf("header message of %d bytes, outside [%d, %d]: %w (%s)", n, wire.Size, most, wire.ErrLimit, l.notHeader(tag))
	if h, herr := wire.Parse(head, wire.Limits{MaxTotal: math.MaxInt64}); herr == nil && h.Kind == wire.KindSend && n >= wire.Size {
		err = errors.Join(err, l.DrainSend(&h, tag, false, 0))
	}
	return err
}

// waitsElsewhere returns, for the error of a receive whose header did
// not come on tag, a note naming the user tag that a message from the
// peer waits on, if one does: a sender whose tags differ from this
// side's (another WithTag, WithPseudoRandTags on one side only) sends
// where nothing receives. It returns "" otherwise.
func (l *link) waitsElsewhere(tag int) string {
	other, ok := l.WaitingTag()
	if !ok || other == tag || other >= MaxUserTag {
		return ""
	}
	return fmt.Sprintf(" (nothing came on tag %d, but a message from rank %d waits on tag %d: does the sender use other tags than this side's %s?)",
		tag, l.Peer, other, l.tagOptions())
}

// notHeader returns the note that ends the error about a message on
// tag, where a receive expects a transfer's header, that cannot be one: a
// leaf of a transfer whose tags differ from this side's lands there.
func (l *link) notHeader(tag int) string {
	return fmt.Sprintf("not a header on tag %d? a leaf of a transfer whose tags are not this side's %s lands there", tag, l.tagOptions())
}

// tagOptions describes the tag options of l for an error: "WithTag(5)",
// or "WithTag(5) with WithPseudoRandTags".
func (l *link) tagOptions() string {
	if l.o.pseudoRand && !l.o.consolidated {
		return fmt.Sprintf("WithTag(%d) with WithPseudoRandTags", l.o.tag)
	}
	return fmt.Sprintf("WithTag(%d)", l.o.tag)
}

// gotBody checks the metadata message body (with an inline storage) of
// the transfer whose header is r.h against the receiver's TensorDict and
// moves to the next phase: the per-leaf messages or the storage chunks. It
// reports done with an error when the transfer ends there (after draining
// what the sender still owes).
func (r *recvOp) gotBody(body []byte) (done bool, err error) {
	l, s, h := r.l, r.s, &r.h
	if err := s.check(l, r.td, h, body); err != nil {
		return true, errors.Join(err, l.DrainSend(h, s.tag0, false, 0))
	}
	if h.MetaLen > 0 {
		s.noteValues(l, h, body[h.ClassLen:int64(h.ClassLen)+h.MetaLen])
	}
	if !l.o.consolidated {
		r.phase, r.i = phaseLeaves, 0
		return false, nil
	}
	dst, err := s.payload(false)
	if err == nil {
		err = s.readable(dst) // MPI's C code writes it (see messages)
	}
	if err != nil {
		// The sender's storage must still be taken, or it stays blocked.
		return true, errors.Join(err, l.drainUnlessDone(h, s.tag0, 0))
	}
	if h.Flags&wire.FlagInline != 0 {
		// The whole storage came in the header message: the receive
		// ends here.
		copy(dst, body[int64(h.ClassLen)+h.MetaLen:])
		r.tag, r.phase = s.tag0, phaseDone
		return true, s.unstaged()
	}
	r.dst, r.phase, r.i = dst, phaseChunks, 0
	return false, nil
}

// drainRest consumes and discards what the sender still sends of a
// transfer whose header has arrived, exactly as the header announces and
// as a refused transfer is drained: each message is awaited at most
// xfer.DrainIdle.
func (r *recvOp) drainRest() error {
	l, s, h := r.l, r.s, &r.h
	switch r.phase {
	case phaseBody:
		return l.DrainSend(h, s.tag0, true, 0)
	case phaseLeaves:
		return l.DrainSend(h, s.tag0, false, int64(r.i))
	case phaseChunks:
		return xfer.DrainChunks(l.Comm, l.Peer, s.tag0, int64((len(r.dst)-r.i+wire.MaxChunk-1)/wire.MaxChunk))
	}
	return nil
}
