// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// InitRemote and FromRemoteInit with WithBroadcast run these steps on every
// rank, holding the group's collective lock:
//
//  0. the ranks check that they name the same root, and that the root is
//     not among the receivers (link.agreeRoot), else all return an error;
//  1. the root broadcasts the first message of Broadcast, bcastFirst
//     bytes or as long as the last frame from this root (nextFirst): its
//     frame (the wire header, the class name, the metadata and, up to
//     initInlineMax, the storage), or the frame's first part, or the
//     root's error;
//  2. every rank checks the header against its limits and, when the
//     frame came whole, builds its TensorDict; the ranks agree
//     (xfer.Step.Agree) that all could, else all return an error, and
//     otherwise all set the length of the next first message;
//  3. when the frame did not fit, the root broadcasts the rest of it;
//  4. when the storage is separate: the ranks agree that all could decode
//     the metadata and allocate the storage (unless step 2 did), then the
//     root broadcasts it in chunks of at most 1 GiB.
//
// A small TensorDict, or one sent again with the same structure, thus
// takes three collective steps, the roots' check, the first message and
// the agreement, which also closes the call (it tells whether a rank
// ran another collective on the group at the same time); otherwise
// closeCollective closes it.

// bcastSend is the root's side.
func (l *link) bcastSend(td *TensorDict) error {
	return proto.Collective(l.Group, func(busy func() bool) error {
		if err := proto.Broken(l.Group, "tensordict: "+l.Op); err != nil {
			return err
		}
		s := xfer.NewStep(l.Ctx, l.Group)
		closed, err := l.bcastSendLocked(s, td, busy)
		if closed {
			return err
		}
		return coll.Close(s, busy, err, l.Errorf)
	})
}

// bcastSendLocked is bcastSend inside the group's collective lock. closed
// reports that its last step was an agreement that closed the call.
func (l *link) bcastSendLocked(s xfer.Step, td *TensorDict, busy func() bool) (closed bool, err error) {
	if err := l.agreeRoot(s, nil); err != nil {
		return false, err
	}
	roots := bcastRoots.Of(l.Group)
	firstLen := roots.of(l.Peer)
	// td's own storage, which MPI may read in the last step (see holds).
	var h holds
	defer func() { h.End(err) }()
	holdConsolidated(td, &h)
	msg, payload, err := bcastPrepare(l, td)
	if err == nil && busy() {
		err = coll.ErrBusy
	}
	if err != nil {
		xfer.PutMsgBuf(msg)
		msg = make([]byte, firstLen)
		putBcastFailed(msg, err)
	} else {
		msg = fitFirst(msg, firstLen, payload != nil)
	}
	if berr := xfer.Bcast(s, msg[:firstLen], l.Peer); berr != nil {
		return false, l.Errorf("broadcasting the header: %w", errors.Join(berr, err))
	}
	oneNode, err := l.agreeNodes(s, err)
	if err != nil {
		return false, err
	}
	// From here on every rank has the same valid header, and takes the
	// same steps.
	frameLen := bcastFrameLen(msg)
	roots.agreed(l.Peer, firstLen, frameLen, oneNode)
	fits := len(msg) == firstLen // the frame came whole
	if !fits {
		if err := xfer.Bcast(s, msg[firstLen:], l.Peer); err != nil {
			return false, l.Errorf("broadcasting the metadata: %w", err)
		}
	}
	xfer.PutMsgBuf(msg) // every step that reads it has completed
	if payload == nil {
		return fits, nil
	}
	if !fits {
		if err := l.agree(s, nil); err != nil {
			return false, err
		}
	}
	if err := s.BcastChunks(payload, l.Peer); err != nil {
		return false, l.Errorf("broadcasting %d bytes of storage: %w", len(payload), err)
	}
	return false, nil
}

// bcastPrepare lays td out for a broadcast: msg, whose first bcastFirst
// bytes are the first message and the rest follows it, holds the first
// message's prefix and the frame (the header, the class name, the
// metadata and, up to initInlineMax, the storage); payload is the
// separate storage, if any: td's consolidated storage, which the caller
// holds (holdConsolidated), or a copy.
func bcastPrepare(l *link, td *TensorDict) (msg, payload []byte, err error) {
	if err := l.Ctx.Err(); err != nil {
		return nil, nil, err
	}
	if msg, payload, err = bcastKeptMessage(l.Op, td); err != nil || msg != nil {
		return msg, payload, err
	}
	sp, err := planSend(l.Op, td)
	if err != nil {
		return nil, nil, err
	}
	// The storage may be a mapping of a file another process truncated:
	// checked before MPI reads it in C.
	if payload, err = sp.bytes(); err == nil {
		err = mem.Readable(payload)
	}
	if err != nil {
		return nil, nil, err
	}
	msg, err = bcastSplitMessage(&initEncoding{class: sp.class, meta: sp.meta, hash: signature(td), leaves: int64(sp.leaves)}, sp.total)
	return msg, payload, err
}

// bcastSplitMessage returns the messages that start the broadcast of a
// TensorDict encoded as enc whose storage of total bytes follows them.
func bcastSplitMessage(enc *initEncoding, total int) ([]byte, error) {
	h := wire.Header{Kind: wire.KindBroadcast, Flags: wire.FlagConsolidated, Hash: enc.hash, Leaves: enc.leaves,
		Total: int64(total), Chunk: wire.MaxChunk, ClassLen: len(enc.class), MetaLen: int64(len(enc.meta))}
	if err := h.Check(senderLimits); err != nil {
		return nil, err
	}
	return bcastFrameMessage(xfer.MsgBuf(bcastMessageLen(wire.Size+int(h.Body()))), &h, enc.class, enc.meta, nil, true), nil
}

// bcastKeptMessage lays td out for a broadcast from the encodings it
// keeps, as the point-to-point InitRemote does (firstInitFrame on its
// first call, then its Send/Recv state): msg as bcastPrepare's and, when
// the storage does not travel inline, payload a view of td's consolidated
// storage. msg is nil when td is to be laid out for this call: on a first
// call whose storage does not travel inline, or when its leaves do not lie
// in one consolidated storage. On a first call, a received result passed
// on unchanged (its template's encoding known) is read without marking
// its storage seen (rawbytes), so that its release can still give its
// region back to the receive pool (see passedOn; the caller holds the
// storage).
func bcastKeptMessage(op string, td *TensorDict) (msg, payload []byte, err error) {
	if td != nil && td.p2p.Load() == nil && !td.initSent.Swap(true) {
		passed := passedOn(td)
		enc, _ := td.templateEncoding()
		if !passed || enc == nil || td.tmpl.stLen <= initInlineMax {
			msg, _, _, err := firstInitFrame(op, td, true, nil, passed)
			return msg, nil, err
		}
		if payload, ok := rawbytes.Of(td.cons.st); ok {
			if msg, err = bcastSplitMessage(enc, len(payload)); err == nil {
				return msg, payload, nil
			}
		} else {
			err = tensor.ErrReleased
		}
		return nil, nil, err
	}
	s, err := p2pStateOf(op, td)
	if err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	if s.total <= initInlineMax {
		msg, err = s.initFrame(td, false, true, initRef{}, false)
		return msg, nil, err
	}
	if s.st == nil {
		return nil, nil, nil
	}
	if payload, err = s.payload(false); err == nil {
		// The storage may be a mapping of a file another process
		// truncated: checked before MPI reads it in C.
		err = mem.Readable(payload)
	}
	if err != nil {
		return nil, nil, err
	}
	msg, err = bcastSplitMessage(&initEncoding{class: td.class, meta: s.meta[:s.metaLen], hash: s.consHash, leaves: int64(len(s.leaves))}, s.total)
	if err != nil {
		return nil, nil, err
	}
	return msg, payload, nil
}

// bcastMessage returns a buffer from xfer.MsgBuf for the messages that
// start a broadcast of a frame of frameLen bytes (startBcastMessage), for
// the caller to write the frame after the prefix.
func bcastMessage(frameLen int, more bool) []byte {
	msg := xfer.MsgBuf(bcastMessageLen(frameLen))
	startBcastMessage(msg, frameLen, more)
	return msg
}

// fitFirst returns msg, the messages that start a broadcast (see
// bcastMessage), laid out for a first message of first bytes: at least
// that many bytes, from xfer.MsgBuf, zeros after the frame, its prefix
// saying whether more messages follow (the frame's rest, or the storage
// when apart). A shorter msg is lengthened in place when its buffer has
// room (the steady state: a buffer's size class is a power of two, the
// first message the frame's length rounded up to 256 bytes), else copied
// into a longer buffer, msg going back to the pool.
func fitFirst(msg []byte, first int, apart bool) []byte {
	frameLen := bcastFrameLen(msg)
	if n := len(msg); n < first && cap(msg) >= first {
		msg = msg[:first]
		clear(msg[n:])
	} else if n < first {
		m := xfer.MsgBuf(first)
		copy(m, msg)
		clear(m[n:])
		xfer.PutMsgBuf(msg)
		msg = m
	}
	more := uint64(0)
	if apart || uint64(bcastPrefix)+frameLen > uint64(first) {
		more = 1
	}
	binary.LittleEndian.PutUint64(msg[16:], more)
	return msg
}

// bcastRecv is the side of every other rank.
func (l *link) bcastRecv() (*TensorDict, error) {
	var td *TensorDict
	err := proto.Collective(l.Group, func(busy func() bool) error {
		if err := proto.Broken(l.Group, "tensordict: "+l.Op); err != nil {
			return err
		}
		s := xfer.NewStep(l.Ctx, l.Group)
		closed, err := l.bcastRecvLocked(s, &td, busy)
		if closed {
			return err
		}
		return coll.Close(s, busy, err, l.Errorf)
	})
	if err != nil {
		// td may have been built before the storage failed to arrive.
		return nil, err
	}
	return td, nil
}

// bcastRecvLocked is bcastRecv inside the group's collective lock; it sets
// *out to the result. closed reports that its last step was an agreement
// that closed the call.
func (l *link) bcastRecvLocked(s xfer.Step, out **TensorDict, busy func() bool) (closed bool, err error) {
	var td *TensorDict
	defer func() { *out = td }()
	var misuse error
	if l.Peer == l.Group.Rank() {
		misuse = errors.New("the root of a broadcast calls InitRemote, not FromRemoteInit")
	}
	if err := l.agreeRoot(s, misuse); err != nil {
		return false, err
	}
	roots := bcastRoots.Of(l.Group)
	firstLen := roots.of(l.Peer)
	// The first message goes into a pooled buffer; the storage of a small
	// transfer, which it holds, is copied out of it.
	first := xfer.MsgBuf(firstLen)
	if err := xfer.Bcast(s, first, l.Peer); err != nil {
		// A step given up leaves first to MPI: it is not pooled again.
		return false, l.Errorf("receiving the header: %w", err)
	}
	defer xfer.PutMsgBuf(first) // nothing built refers to its bytes
	frameLen, more, err := parseBcastFirst(l.Op, l.Peer, first)
	var h wire.Header
	if err == nil {
		h, err = wire.Parse(first[bcastPrefix:], l.o.limits())
	}
	if err == nil {
		err = checkBcastFrame(&h, l.Peer, frameLen, more, firstLen)
	}
	if err == nil {
		err = l.Ctx.Err()
	}
	// Whether the frame came whole in the first message; valid, and the
	// same on every rank, once the agreement passed.
	fits := frameLen <= uint64(firstLen-bcastPrefix)
	inline := h.Flags&wire.FlagInline != 0
	finish := func(bool) error { return nil }
	var st *tensor.Storage
	switch {
	case err != nil:
	case fits:
		f := wire.FrameOf(h, first[bcastPrefix+wire.Size:])
		td, st, finish, _, err = l.buildInit(&f, true, nil, nil)
	}
	if err == nil && busy() {
		err = coll.ErrBusy
	}
	oneNode, err := l.agreeNodes(s, err)
	if err != nil {
		if td != nil {
			err = errors.Join(err, finish(false))
		}
		td = nil
		return false, err
	}
	roots.agreed(l.Peer, firstLen, frameLen, oneNode)
	if !fits {
		// The rest of the frame, into memory of the receive pool, written
		// whole by the broadcast. The result gets a copy of an inline
		// storage (buildInit with scratch), so the frame goes back to the
		// pool at once, and the copy with the result's release.
		frame, merr := mem.Recv(int(frameLen))
		if merr != nil {
			frame = xfer.AlignedBuf(int(frameLen)) // every rank takes part
		}
		n := copy(frame, first[bcastPrefix:])
		if err := xfer.Bcast(s, frame[n:], l.Peer); err != nil {
			// A step given up leaves frame to MPI: it stays out of the pool.
			return false, l.Errorf("receiving the metadata: %w", err)
		}
		f := wire.FrameOf(h, frame[wire.Size:])
		td, st, finish, _, err = l.buildInit(&f, true, nil, nil)
		mem.GiveBack(frame) // nothing built refers to its bytes
		if !inline {
			if err := l.agree(s, err); err != nil {
				td = nil
				return false, err
			}
		} else if err != nil {
			td = nil
			return false, l.Errorf("%w", err)
		}
	}
	closed = fits && inline
	if !inline {
		// The storage's bytes are received without marking them seen
		// (package rawbytes), as a point-to-point receive's are: the
		// result goes back to the receive pool when released.
		b, _ := rawbytes.Of(st)
		if err := s.BcastChunks(b, l.Peer); err != nil {
			td = nil
			return false, l.Errorf("receiving %d bytes of storage: %w", h.Total, errors.Join(err, finish(false)))
		}
	}
	if err := finish(true); err != nil {
		td = nil
		return closed, l.Errorf("%w", err)
	}
	return closed, nil
}

// agreeRoot is the first step of broadcast mode: before any message of the
// broadcast is posted, the ranks check that they name the same root
// (xfer.Step.AgreeRoot), and that no rank is stopped before it (local,
// this rank's error: the root called FromRemoteInit, which nobody would
// send to). Otherwise every rank returns an error: wrapping ErrMismatch
// and naming the lowest and the highest root when the roots differ.
func (l *link) agreeRoot(s xfer.Step, local error) error {
	lo, hi, fail, err := s.AgreeRoot(l.Peer, local != nil)
	switch {
	case err != nil:
		return l.Errorf("agreeing on the root: %w", coll.OutOfStep(errors.Join(err, local)))
	case lo != hi:
		return l.Errorf("ranks passed different roots (%d and %d): %w", lo, hi, errors.Join(ErrMismatch, local))
	case local != nil:
		return l.Errorf("%w", local)
	case fail != -1:
		return l.Errorf("rank %d of the group could not go on (its own error says why)", fail)
	}
	return nil
}

// agree tells every rank of the group whether all of them can go on. local
// is this rank's own error or nil. If some rank failed, agree returns the
// local error on a rank that failed and, elsewhere, an error naming the
// lowest failing rank.
func (l *link) agree(s xfer.Step, local error) error {
	r, err := s.Agree(local != nil)
	return l.agreement(r, err, local)
}

// agreeNodes is agree that also tells whether every rank of the group
// found all of its ranks on its own node (group.Group.OnOneNode), the same
// on every rank: the first agreement of broadcast mode.
func (l *link) agreeNodes(s xfer.Step, local error) (oneNode bool, err error) {
	x := int32(0)
	if l.Group.OnOneNode() {
		x = 1
	}
	r, low, err := s.AgreeMin(local != nil, x)
	return low == 1, l.agreement(r, err, local)
}

// agreement returns the error of an agreement that named r as the lowest
// failing rank, or failed with err; local is this rank's own error.
func (l *link) agreement(r int, err, local error) error {
	switch {
	case err != nil:
		return l.Errorf("agreeing to go on: %w", coll.OutOfStep(errors.Join(err, local)))
	case local != nil:
		return l.Errorf("%w", local)
	case r < l.Group.Size():
		return l.Errorf("rank %d of the group could not go on (its own error says why)", r)
	}
	return nil
}

// bcastRootTable holds, for each root of a group's broadcast-mode
// InitRemotes, the length of the next first message from it (nextFirst;
// 0 for bcastFirst), the same on every rank.
type bcastRootTable struct {
	mu    sync.Mutex
	first map[int]int // by root rank
}

var bcastRoots = proto.Slot[bcastRootTable]{New: func() *bcastRootTable { return &bcastRootTable{first: map[int]int{}} }}

// of returns the length of the next first message from root.
func (t *bcastRootTable) of(root int) int {
	t.mu.Lock()
	first := t.first[root]
	t.mu.Unlock()
	return max(first, bcastFirst)
}

// agreed records that every rank took a first message of first bytes
// from root, which started a frame of frameLen bytes: it sets the length
// of the next one (nextFirst). Every rank calls it once the ranks agreed
// that all took it, and whether all are on one node, so that all send and
// receive first messages of the same length.
func (t *bcastRootTable) agreed(root, first int, frameLen uint64, oneNode bool) {
	next := nextFirst(first, frameLen, oneNode)
	if next == first {
		return
	}
	t.mu.Lock()
	t.first[root] = next
	t.mu.Unlock()
}

// bcastFirstMax bounds the first messages of broadcast-mode InitRemote:
// a frame longer than that (the header, class name, metadata and a
// storage of up to initInlineMax bytes) is sent in parts, whatever came
// before it.
const bcastFirstMax = 2 * initInlineMax

// nextFirst returns the length of the first message that follows one of
// first bytes, which started a frame of frameLen bytes. A broadcast's
// count must be the same on every rank, and the receivers cannot know how
// long the next frame is: all of them take the last one's length as the
// next one's (rounded up to 256 bytes, up to bcastFirstMax), or keep
// first while the frame fits it and fills at least half of it. A root
// that sends frames of one length (one structure, the steady state) then
// sends each whole in the first message: two collective steps, that
// message and the agreement, where a frame longer than bcastFirst took
// four (the agreement, the rest of the frame, then closeCollective).
//
// When all ranks are on one node (oneNode, agreed by all), the first
// message stays bcastFirst bytes long up to 2*bcastFirst: two messages
// within Open MPI's eager limit for shared memory (4 KiB), with the steps
// between, took less time than one message past it. 16 leaves, one node,
// np 2 (tdmpi bench, three alternating pairs): 4 KiB of storage (a frame
// of 6 KiB) took 1.70-1.88x raw in parts and 2.33-2.44x whole, 8 KiB
// 2.69-2.75x in parts and 2.25-2.35x whole; 16-64 KiB 1.99-2.78x and
// 1.89-2.17x. Between nodes, where every message costs a network latency
// (and Open MPI's TCP eager limit is 64 KiB), one message is faster from
// the first byte over bcastFirst.
func nextFirst(first int, frameLen uint64, oneNode bool) int {
	if frameLen > bcastFirstMax {
		return bcastFirst
	}
	split := bcastFirst // the longest frame+prefix sent in parts
	if oneNode {
		split = 2 * bcastFirst
	}
	n := bcastPrefix + int(frameLen)
	switch {
	case n <= first && 2*n >= first:
		return first
	case n <= split || n > bcastFirstMax:
		return bcastFirst
	}
	return min((n+255)&^255, bcastFirstMax)
}
