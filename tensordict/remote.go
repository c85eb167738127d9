// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// link is one point-to-point or broadcast-mode operation in progress: the
// protocol's view of it (xfer.Link) and the call's resolved options.
type link struct {
	xfer.Link
	o remoteOptions
}

// newLink checks the resolved options o of op and the peer rank. It returns the
// link by value, so that it stays on the caller's stack (see link.init).
func newLink(op string, peer int, dir string, o remoteOptions) (link, error) {
	l := link{o: o}
	err := l.init(op, peer, dir)
	return l, err
}

// init checks l's resolved options (l.o) and the peer rank, and fills in
// the rest of l for op. The calls on the path of every small transfer
// resolve their options into a link on their stack and init it there:
// building one and returning it by value, copies of 250 bytes, took 54 ns
// a call against 18 (a ping-pong makes two calls each way).
func (l *link) init(op string, peer int, dir string) error {
	if err := l.o.check(op); err != nil {
		return err
	}
	g := l.o.group
	l.Link = xfer.Link{Op: op, Group: g, Comm: proto.LibComm(g), Peer: peer, Dir: dir, Ctx: l.o.ctx}
	if peer == AnySource {
		return l.initAnySource()
	}
	if l.o.broadcast { // WithTorch's broadcast (see newTorchLink)
		if peer < 0 || peer >= g.Size() {
			return l.Errorf("root rank %d is out of range [0, %d) of %s", peer, g.Size(), xfer.DescribeGroup(g))
		}
		return nil
	}
	switch {
	case peer < 0 || peer >= g.Size():
		return l.Errorf("rank %d is out of range [0, %d) of %s", peer, g.Size(), xfer.DescribeGroup(g))
	case peer == g.Rank():
		return l.Errorf("rank %d is the caller itself", peer)
	}
	return nil
}

// sendPlan is what InitRemote sends: the storage, the metadata and the
// class name of a TensorDict laid out for consolidation.
type sendPlan struct {
	class  string
	meta   []byte // metadata JSON, padded by xfer.MetaAlign
	total  int
	leaves int
	// storage is the consolidated storage when td already has one in the
	// planned layout; otherwise nil, and pack fills a buffer from p.
	storage []byte
	p       *plan
}

// planSend lays out td for sending, without copying any data.
func planSend(op string, td *TensorDict) (*sendPlan, error) {
	p, err := makePlan(op, td, 0, false)
	if err != nil {
		return nil, err
	}
	meta, err := encodeMetadata(p)
	if err != nil {
		return nil, err
	}
	sp := &sendPlan{class: td.class, total: p.total, p: p, leaves: len(p.flatten())}
	sp.meta = xfer.MetaAlign(meta, len(sp.class))
	if c := td.cons; c != nil && c.base == 0 && c.end == c.st.Len() && c.end == p.total && inPlannedLayout(p, c.st) {
		sp.storage = c.st.Bytes()
	}
	return sp, nil
}

// inPlannedLayout reports whether every leaf of p views st at its planned
// offset, so that st's bytes are the consolidated storage.
func inPlannedLayout(p *plan, st *tensor.Storage) bool {
	if st.Released() {
		return false
	}
	for _, l := range p.flatten() {
		if l.t.Storage() != st || l.t.Offset() != l.start || !l.t.IsContiguous() {
			return false
		}
	}
	return true
}

// bytes returns the consolidated storage of sp, packing it if needed.
func (sp *sendPlan) bytes() ([]byte, error) {
	if sp.storage != nil {
		return sp.storage, nil
	}
	buf := mem.AllocUninit(sp.total) // pack writes every byte, pads too
	if err := pack(buf, sp.p, true); err != nil {
		return nil, err
	}
	return buf, nil
}

// blocksMax is the largest storage of leaves apart that an InitRemote
// sends as one message from its runs (xfer.Link.SendBlocks: MPI reads the
// large leaves where they lie, the small ones from the buffers they were
// packed into); a larger one travels as runs, one message each
// (wire.FlagRuns). 16 leaves set one by one, np 2, tdmpi bench
// initremote-set, two alternating runs: 128-512 KiB took 52-97 us as one
// message against 134-149 us as runs; from 1 MiB one message from blocks
// was slower and erratic (a 16-128 MiB message took 5-25x raw in some
// runs), as Open MPI copies a message that is not contiguous through
// shared-memory fragments that the sender must progress.
const blocksMax = 512 << 10

// initRef is how an InitRemote frame travels: its kept structure
// (xfer.Kept), and how its storage goes.
type initRef struct {
	xfer.Kept
	tag int // the payload's tag, when the storage travels apart
	// joined: the storage travels in the header message but apart from
	// the frame's buffer, the two sent in two blocks (see storageTravel).
	joined bool
}

// layout reports how the storage of a point-to-point InitRemote frame of
// class name class, metadata meta and total bytes of storage that travels
// as r goes (storageTravel): apart from the header (split), in the header
// message in two blocks (joined, up to wire.InlineMax bytes, only inPlace:
// for a blocking send whose storage stays readable where it lies), or
// copied into the header message (neither).
func (r initRef) layout(class string, meta []byte, total int, inPlace bool) (split, joined bool) {
	if r.Described {
		class, meta = "", nil
	}
	copied, joined := storageTravel(wire.Size+len(class)+len(meta), total, wire.InlineMax)
	joined = joined && inPlace
	return !copied && !joined, joined
}

// InitRemote sends td to rank dst of the group, which builds a copy of it
// with FromRemoteInit, as tensordict's init_remote. Options: WithGroup,
// WithBroadcast, WithContext.
//
// td is laid out as Consolidate would (every leaf's bytes, 8-byte aligned,
// depth first in insertion order) and travels as one header message (the
// wire header, the tensorclass name and the consolidated metadata JSON)
// followed by the storage: inside the same message when the whole fits in
// about 4000 bytes (xfer.EagerSendMax: 8 KiB under MPICH; without a context that
// can end, up to 8 KiB of storage in two blocks), else in messages of
// at most 1 GiB on a tag unique to this transfer, so that concurrent InitRemote calls between
// the same ranks never mix. Once dst has received a structure, later
// InitRemotes of the same class name and metadata to it send a number in
// place of them (see "Communication over MPI" in the package
// documentation). All messages use the group's library communicator. If
// td is already consolidated its storage is sent as is. Otherwise its
// leaves of 16 KiB or more (wire.RunMin) are sent where they lie, one
// message each, and the rest packed; a storage without such leaves, or
// with one that is not contiguous, is packed into a buffer first.
//
// With WithContext, a context that has already ended sends nothing, and
// one that ends during the transfer bounds it as it bounds Send: the
// header and the storage are posted at once, and given up with an error
// wrapping ctx.Err(); MPI still delivers them whole if the receiver calls
// FromRemoteInit, and keeps reading td's storage (or the packed copy, or
// the leaves it sends where they lie) until then: a leaf changed in the
// meantime arrives changed. A memory-mapped storage whose file was
// truncated is refused before anything is sent (memmap.ErrFault). Without
// a context that can end, an InitRemote to a rank that leaves the group
// (its group.Finalize) without receiving it fails as a Send does: with an
// error wrapping group.ErrPeerLeft unless every message went eagerly.
//
// With WithBroadcast every rank of the group takes part: the caller is the
// source, dst is ignored, and every other rank calls FromRemoteInit with
// WithBroadcast and this rank as src. The transfer is then the broadcast
// of Broadcast, with its messages, checks and errors: the ranks compare
// their roots first, or, from the last broadcast's root, after its first
// message (ranks that name different ones all return an error wrapping
// ErrMismatch that names the lowest and the highest), and a
// receiver that refuses the header (WithMaxBytes, the memory it has)
// makes every rank return an error (a *PeerError naming it elsewhere)
// before the storage moves.
func (td *TensorDict) InitRemote(dst int, opts ...RemoteOption) error {
	if broadcastMode(opts) {
		return td.initBroadcast(opts) // a collective, which logs its failure
	}
	return xfer.LogFailed("InitRemote", td.initRemote(dst, opts))
}

func (td *TensorDict) initRemote(dst int, opts []RemoteOption) error {
	if torchOn(opts) {
		return td.initRemoteTorch(dst, opts)
	}
	var lv link // on the stack: see link.init
	l := &lv
	resolveInto(&l.o, opts, usesInitSend)
	if err := l.init("InitRemote", dst, "to"); err != nil {
		return err
	}
	if xfer.InfoOn() {
		l.LogStart(tensorBytes(td), xfer.InitHeaderTag)
	}
	if err := l.NotStarted(); err != nil {
		return err
	}
	if td != nil && td.p2p.Load() == nil && !td.initSent.Swap(true) && (td.cons != nil || tensorBytes(td) <= wire.InlineMax) {
		// The first InitRemote of a TensorDict that Send and Recv never
		// saw (a result being passed on, say) encodes what it sends
		// without building their state; the next one builds it, and the
		// calls after reuse it. One whose leaves lie apart in more than
		// wire.InlineMax bytes builds it at once, to send them where they
		// lie (sendStateRuns).
		return l.sendInitOnce(td)
	}
	if sent, err := l.sendStateInit(td); err != nil || sent {
		return err
	}
	return l.sendInitOnce(td)
}

// initMessageName names message i of a point-to-point InitRemote in
// errors: the header frame, then the storage chunks.
func initMessageName(i int) string {
	if i == 0 {
		return "the header"
	}
	return fmt.Sprintf("storage chunk %d", i)
}

// sendStateInit sends td's InitRemote (sent true) from the encodings Send
// and Recv keep with td (its state s), so that sending the same
// TensorDict again encodes nothing: as a single message when the storage
// travels inline, else as the header message and the storage (see
// sendSplitInit). A storage over wire.InlineMax that is not a view of td's
// consolidated storage is left to the caller (sent false), which packs it
// for this call alone rather than into a staging buffer kept with td. The
// single message is built in a buffer of xfer.MsgBuf's pools, handed back
// after the send unless MPI may still read it (a send given up).
func (l *link) sendStateInit(td *TensorDict) (sent bool, err error) {
	s, err := p2pStateOf(l.Op, td)
	if err != nil {
		return false, l.Errorf("%w", err)
	}
	if s.total > wire.InlineMax && s.st == nil {
		if s.contiguous == nil {
			return true, l.sendStateRuns(s, td)
		}
		// A large storage that is not td's own would be packed into a
		// staging buffer kept with td: the caller packs it for this call
		// alone.
		s.mu.Unlock()
		return false, nil
	}
	// td's own storage, which MPI may read after s is unlocked.
	var h holds
	_ = h.Add(s.st) // released, s was rebuilt without it (refresh)
	defer func() { h.End(err) }()
	blocking := l.Ctx.Done() == nil
	r := initRef{Kept: l.KeepRef(td.class, s.meta[:s.metaLen], s.consHash, int64(len(s.leaves)), int64(s.total))}
	// A storage joined to the header message is read after s is unlocked:
	// td's own consolidated storage, not s's staging buffer.
	split, join := r.layout(td.class, s.meta[:s.metaLen], s.total, blocking && s.st != nil)
	if split {
		err := l.sendSplitInit(s, td, r)
		l.KeptSent(r.Kept, err)
		return true, err
	}
	frame, err := s.initFrame(td, r, join)
	var storage []byte
	if join && err == nil {
		storage, err = s.storageView()
	}
	// The send is made without td's lock, so that other transfers of td
	// (a Recv the peer waits for first, say) are not held up by it.
	s.mu.Unlock()
	if err != nil {
		l.KeptSent(r.Kept, err)
		return true, l.Errorf("%w", err)
	}
	var gone bool
	if join {
		gone, err = l.SendJoined(frame, storage, xfer.InitHeaderTag, initMessageName)
	} else {
		msgs, tags := [1][]byte{frame}, [1]int{xfer.InitHeaderTag}
		gone, err = l.SendMessages(msgs[:], tags[:], initMessageName)
	}
	if !gone { // else MPI may still read frame
		xfer.PutMsgBuf(frame)
	}
	l.KeptSent(r.Kept, err)
	if err != nil {
		return true, l.Errorf("%w", err)
	}
	return true, nil
}

// sendStateRuns sends td, whose state s is locked (sendStateRuns unlocks
// it), whose contiguous leaves lie apart: the header message, described
// by a structure kept at l.Peer when it can be, then the storage from its
// runs (stateRuns): up to blocksMax bytes as one message from their
// blocks (xfer.Link.SendBlocks), past it each run a message of its own
// (wire.FlagRuns). A TensorDict sent again and again is neither laid out
// nor encoded again, and its large leaves are read where they lie.
func (l *link) sendStateRuns(s *p2pState, td *TensorDict) (err error) {
	var held holds
	defer func() { held.End(err) }()
	r := initRef{Kept: l.KeepRef(td.class, s.meta[:s.metaLen], s.consHash, int64(len(s.leaves)), int64(s.total))}
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Hash: s.consHash, Leaves: int64(len(s.leaves)),
		Total: int64(s.total), Chunk: wire.MaxChunk, PayloadTag: proto.PayloadTag(l.Group)}
	var runs [][]byte
	err = s.guard(func() (err error) { runs, err = s.stateRuns(&held); return err })
	if s.total > blocksMax {
		h.Flags, h.Chunk = h.Flags|wire.FlagRuns, int64(len(runs))
	}
	class, meta := r.Apply(&h, td.class, s.meta[:s.metaLen])
	frame := wire.AppendFrame(xfer.MsgBuf(wire.Size + len(class) + len(meta))[:0], &h, class, meta, nil)
	s.mu.Unlock()
	if err == nil {
		err = h.Check(senderLimits)
	}
	if err != nil {
		xfer.PutMsgBuf(frame)
		l.KeptSent(r.Kept, err)
		return l.Errorf("%w", err)
	}
	var gone bool
	if h.Flags&wire.FlagRuns != 0 {
		msgs := append(make([][]byte, 0, 1+len(runs)), frame)
		tags := make([]int, 1, 1+len(runs))
		tags[0] = xfer.InitHeaderTag
		for _, m := range runs {
			msgs, tags = append(msgs, m), append(tags, h.PayloadTag)
		}
		gone, err = l.SendMessages(msgs, tags, initMessageName)
	} else {
		msgs, tags := [1][]byte{frame}, [1]int{xfer.InitHeaderTag}
		if gone, err = l.SendMessages(msgs[:], tags[:], initMessageName); err == nil {
			if _, err = l.SendBlocks(runs, h.PayloadTag); err != nil {
				err = fmt.Errorf("sending %s: %w", initMessageName(1), err)
			}
		}
	}
	if !gone {
		xfer.PutMsgBuf(frame)
	}
	l.KeptSent(r.Kept, err)
	if err != nil {
		return l.Errorf("%w", err)
	}
	return nil
}

// stateRuns returns the consolidated storage of s, whose leaves are
// contiguous, as the blocks of its runs (wire.Runs): the
// large leaves where they lie, each held in held, and new buffers that
// the others are copied into with the pads and gaps between them, zero.
func (s *p2pState) stateRuns(held *holds) ([][]byte, error) {
	spans := make([]wire.Span, len(s.leaves))
	for i, l := range s.leaves {
		spans[i] = wire.Span{Start: int64(l.off), Len: int64(l.n)}
	}
	runs, place := wire.Runs(nil, []bool{}, spans, int64(s.total))
	blocks := make([][]byte, len(runs))
	li := 0 // the first leaf that does not end before the run
	for i, r := range runs {
		start, end := int(r.Start), int(r.End())
		for li < len(s.leaves) && s.leaves[li].off+s.leaves[li].n <= start {
			li++
		}
		var buf []byte
		pos := start // packed up to here
		if !place[i] {
			buf = mem.AllocUninit(end - start) // every byte written below
		}
		for j := li; j < len(s.leaves) && s.leaves[j].off < end; j++ {
			l := &s.leaves[j]
			if l.n == 0 {
				continue
			}
			b, err := l.t.Bytes()
			if err == nil {
				err = s.readable(b)
			}
			if err != nil {
				return nil, fmt.Errorf("key %v: %w", l.key, err)
			}
			if !place[i] {
				clear(buf[pos-start : l.off-start]) // a pad or gap
				pos = l.off + copy(buf[l.off-start:], b)
				continue
			}
			if err := held.Add(l.t.Storage()); err != nil {
				return nil, fmt.Errorf("key %v: %w", l.key, err)
			}
			buf = b[start-l.off : end-l.off]
		}
		if !place[i] {
			clear(buf[pos-start:])
		}
		blocks[i] = buf
	}
	return blocks, nil
}

// sendSplitInit sends td, whose state s is locked (sendSplitInit unlocks
// it), as the header message of an InitRemote without inline storage,
// travelling as r, then its storage: a view of td's consolidated storage,
// else a copy of the leaves made under the lock. The caller reports the
// outcome to l.KeptSent.
func (l *link) sendSplitInit(s *p2pState, td *TensorDict, r initRef) error {
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Hash: s.consHash, Leaves: int64(len(s.leaves)),
		Total: int64(s.total), Chunk: wire.MaxChunk, PayloadTag: proto.PayloadTag(l.Group)}
	class, meta := r.Apply(&h, td.class, s.meta[:s.metaLen])
	frame := wire.AppendFrame(xfer.MsgBuf(wire.Size + len(class) + len(meta))[:0], &h, class, meta, nil)
	var payload, copied []byte
	// The storage may be a mapping of a file another process truncated.
	err := s.guard(func() error {
		p, err := s.payload(true)
		if err != nil || s.st != nil {
			payload = p
			return err
		}
		copied = append(xfer.MsgBuf(len(p))[:0], p...) // the staging buffer is s's
		payload = copied
		return nil
	})
	external := s.external
	s.mu.Unlock()
	if err == nil && external {
		err = mem.Readable(payload)
	}
	if err != nil {
		xfer.PutMsgBuf(frame)
		xfer.PutMsgBuf(copied)
		return l.Errorf("the consolidated storage: %w", err)
	}
	gone, err := l.sendInitMessages(frame, payload, h.PayloadTag)
	if !gone {
		xfer.PutMsgBuf(frame)
		xfer.PutMsgBuf(copied)
	}
	return err
}

// sendInitMessages sends the header message frame of an InitRemote and,
// unless payload is nil, the storage after it on tag, in chunks of at most
// wire.MaxChunk (see xfer.Link.SendMessages for gone).
func (l *link) sendInitMessages(frame, payload []byte, tag int) (gone bool, err error) {
	var msgs [2][]byte
	var tags [2]int
	m, t := append(msgs[:0], frame), append(tags[:0], xfer.InitHeaderTag)
	if payload != nil {
		m, t = xfer.AppendChunks(m, t, payload, tag)
	}
	gone, err = l.SendMessages(m, t, initMessageName)
	if err != nil {
		return gone, l.Errorf("%w", err)
	}
	return gone, nil
}

// sendInitOnce sends td's InitRemote as sendStateInit does, but laid out
// and encoded for this call alone (firstInitFrame).
func (l *link) sendInitOnce(td *TensorDict) (err error) {
	var h holds
	defer func() { h.End(err) }()
	holdConsolidated(td, &h)
	frame, payload, r, err := firstInitFrame(l.Op, td, l, passedOn(td))
	if err != nil {
		return l.Errorf("%w", err)
	}
	var gone bool
	switch {
	case r.joined:
		if gone, err = l.SendJoined(frame, payload, xfer.InitHeaderTag, initMessageName); err != nil {
			err = l.Errorf("%w", err)
		}
	default:
		gone, err = l.sendInitMessages(frame, payload, r.tag)
	}
	if !gone {
		xfer.PutMsgBuf(frame) // MPI no longer reads it
	}
	l.KeptSent(r.Kept, err)
	return err
}

// passedOn reports whether td is a received result passed on unchanged
// (its template's encoding known): the first InitRemote of it, in either
// mode, then reads its storage through rawbytes, without marking it seen,
// so that its release can still give its region back to the receive
// pool. Any other TensorDict planSend lays out, reading it as any caller
// does.
func passedOn(td *TensorDict) bool {
	return td != nil && td.cons != nil && td.tmpl != nil && td.tmpl.enc.Load() != nil
}

// holdConsolidated holds, in h, td's consolidated storage (if any), which
// an InitRemote or broadcast of td may give MPI (see holds). A released
// storage is not held: the transfer refuses it.
func holdConsolidated(td *TensorDict, h *holds) {
	if td != nil && td.cons != nil {
		_ = h.Add(td.cons.st)
	}
}

// firstInitFrame returns the message of the first InitRemote of td (see
// sendInitOnce), a buffer from xfer.MsgBuf, and how it travels to l.Peer
// (l.initRef; none when l is nil: the whole frame). To l.Peer, a split frame (see
// initRef.layout) is the header message alone, and payload the storage that
// follows it on r.tag, or with r.joined the storage that follows it in the
// same message (mpix.SendConcat); else payload is nil. A received TensorDict passed
// on unchanged (templateEncoding) reuses the encoding of the first copy of
// its template that was: only its storage is new, read through rawbytes
// when passedOn (see there).
func firstInitFrame(op string, td *TensorDict, l *link, passedOn bool) (frame, payload []byte, r initRef, err error) {
	enc, sp, err := sendEncoding(op, td)
	if err != nil {
		return nil, nil, r, err
	}
	storage := func() ([]byte, error) {
		if !passedOn {
			return td.cons.st.Bytes(), nil
		}
		if b, ok := rawbytes.Of(td.cons.st); ok {
			return b, nil
		}
		return nil, tensor.ErrReleased
	}
	var total int
	if sp != nil {
		total, storage = sp.total, sp.bytes
	} else {
		total = td.tmpl.stLen
	}
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Hash: enc.hash, Leaves: enc.leaves}
	class, meta := enc.class, enc.meta
	split := false
	if l != nil {
		r = initRef{Kept: l.KeepRef(class, meta, h.Hash, h.Leaves, int64(total))}
		class, meta = r.Apply(&h, class, meta)
		split, r.joined = r.layout(class, meta, total, l.Ctx.Done() == nil)
		switch {
		case r.joined:
			h.Flags, h.Total = h.Flags|wire.FlagInline, int64(total)
		case split:
			h.Total, h.Chunk, h.PayloadTag = int64(total), wire.MaxChunk, proto.PayloadTag(l.Group)
			r.tag = h.PayloadTag
		}
	}
	// The storage may be a mapping of a file another process truncated.
	err = mem.CatchFault(func() error {
		p, err := storage()
		if err != nil {
			return err
		}
		if split || r.joined { // the header message alone, then the storage
			frame = wire.AppendFrame(xfer.MsgBuf(wire.Size + len(class) + len(meta))[:0], &h, class, meta, nil)
			payload = p
			return mem.Readable(p)
		}
		frame = xfer.MsgBuf(wire.Size + len(class) + len(meta) + len(p))
		wire.AppendFrame(frame[:0], &h, class, meta, p) // every byte of frame
		return nil
	})
	if err != nil {
		err = fmt.Errorf("the consolidated storage: %w", err)
	} else {
		err = h.Check(senderLimits)
	}
	if err != nil {
		xfer.PutMsgBuf(frame)
		if l != nil {
			l.KeptSent(r.Kept, err)
		}
		return nil, nil, initRef{}, err
	}
	return frame, payload, r, nil
}

// sendEncoding returns what the first InitRemote or Broadcast of td sends
// besides its storage. For an unedited copy of a template whose encoding a
// first copy recorded (templateEncoding) that is the encoding, and sp is
// nil; otherwise it is made from td's send plan sp, and recorded for the
// other copies when td is a copy whose storage lies in that plan's layout.
func sendEncoding(op string, td *TensorDict) (enc *initEncoding, sp *sendPlan, err error) {
	enc, copied := td.templateEncoding()
	if enc != nil {
		return enc, nil, nil
	}
	if sp, err = planSend(op, td); err != nil {
		return nil, nil, err
	}
	enc = &initEncoding{class: sp.class, meta: sp.meta, hash: signature(td), leaves: int64(sp.leaves)}
	if copied && sp.storage != nil {
		td.recordEncoding(enc)
	}
	return enc, sp, nil
}

// initFrame returns the message of an InitRemote of td, whose state s is
// locked and whose storage travels inline, in a buffer from xfer.MsgBuf:
// the header, the class name, the metadata and the storage. With head, it
// ends before the storage, which the caller sends after it in the same
// message (mpix.SendConcat).
func (s *p2pState) initFrame(td *TensorDict, r initRef, head bool) ([]byte, error) {
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated | wire.FlagInline, Total: int64(s.total),
		Hash: s.consHash, Leaves: int64(len(s.leaves))}
	class, meta := r.Apply(&h, td.class, s.meta[:s.metaLen])
	pad := (8 - (wire.Size+len(class)+len(meta))%8) % 8
	h.MetaLen, h.ClassLen = int64(len(meta)+pad), len(class)
	n := wire.Size + len(class) + len(meta) + pad
	if !head {
		n += s.total
	}
	frame := xfer.MsgBuf(n)
	wire.Put(frame, &h)
	off := wire.Size + copy(frame[wire.Size:], class)
	off += copy(frame[off:], meta)
	for range pad {
		frame[off] = ' '
		off++
	}
	if head {
		return frame, nil
	}
	// The storage may be a mapping of a file another process truncated.
	err := s.guard(func() error {
		payload, err := s.payload(true)
		copy(frame[off:off+s.total], payload)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the consolidated storage: %w", err)
	}
	return frame, nil
}

// senderLimits checks what a sender puts in a header: the receiver's
// limits are not known, so only the structural ones apply.
var senderLimits = wire.Limits{MaxTotal: math.MaxInt64, MaxInline: wire.InlineMax}

// FromRemoteInit receives the TensorDict that rank src of the group sends
// with InitRemote, as tensordict's from_remote_init. Options: WithGroup,
// WithBroadcast, WithContext, WithMaxBytes, WithDevice, WithMemmap,
// WithAllocator. Point to point, src may be AnySource: the result is the
// first rank's whose InitRemote matches, which its Source names.
//
// Everything from the peer is checked before use: the header against the
// limits (WithMaxBytes: by default the machine's memory, at most 64 GiB)
// and the memory available (ErrNoMemory) before any allocation, the
// metadata as FromConsolidated checks it. A refused transfer's payload is
// drained, exactly the messages its header announces (each awaited at
// most 2 s), so that the sender does not hang. The storage is allocated once and
// received in place; every leaf of the result views it, so the result is
// consolidated and a later Recv with WithConsolidated into it moves one
// message with no allocation. Non-tensor values, nesting, batch sizes and
// the lock state arrive as they were; a memory-mapped leaf of the sender
// arrives as an ordinary leaf; a tensorclass keeps its class name (see
// FromRemoteInitAs).
//
// With WithContext, a receive still waiting for the header, or for the
// storage, when the context ends returns an error wrapping ctx.Err(). If
// MPI was already writing the storage (a large chunk of it), that receive
// cannot be recalled: the error also wraps ErrReceiveAbandoned, the
// storage is dropped unread (with WithMemmap its file is removed, its
// mapping kept), and the storage WithAllocator returned must not be
// reused while MPI may still write it.
//
// With WithMemmap(prefix), the storage is received straight into the
// memory-mapped file prefix/consolidated.td, which then holds tensordict's
// consolidated single-file format: the storage, the metadata JSON, and the
// JSON length as a little-endian int64 (Python's
// TensorDict.from_consolidated reads it). The leaves of the result view
// the mapping; nothing is copied after the receive.
//
// With WithBroadcast, the receive is a broadcast from src (see InitRemote)
// that every rank of the group but src takes part in, bounded by
// WithContext as Broadcast is; WithMemmap and WithAllocator give the
// storage as above.
func FromRemoteInit(src int, opts ...RemoteOption) (*TensorDict, error) {
	if broadcastMode(opts) {
		return fromBroadcast(src, opts) // a collective, which logs its failure
	}
	td, err := fromRemoteInit(src, opts)
	mem.Received() // see there: after this one, what the caller drops can come back
	return td, xfer.LogFailed("FromRemoteInit", err)
}

func fromRemoteInit(src int, opts []RemoteOption) (*TensorDict, error) {
	if torchOn(opts) {
		td, err := fromRemoteInitTorch(src, opts)
		return td.receivedFrom(src), err
	}
	var lv link // on the stack: see link.init
	l := &lv
	resolveInto(&l.o, opts, usesInitRecv)
	if err := l.init("FromRemoteInit", src, "from"); err != nil {
		return nil, err
	}
	l.LogStart(-1, xfer.InitHeaderTag)
	td, err := l.recvInit()
	return td.receivedFrom(l.Peer), err // l.Peer: the sender, for AnySource too
}

// recvInit is the point-to-point receiving side of InitRemote.
func (l *link) recvInit() (*TensorDict, error) {
	lim := l.o.limits()
	sizes := initFrames.Of(l.Group)
	sizes.mu.Lock()
	last := sizes.last[l.Peer] // the layout of the last frame from this peer
	sizes.mu.Unlock()
	var spare *spareCopy
	if last.head == 0 && l.Ctx.Done() == nil && l.o.memmap == "" && l.o.alloc == nil {
		// A blocking receive into memory of its own, of a frame it
		// receives whole.
		spare = newSpare(last.tp)
	}
	frame, split, err := l.recvInitFrame(lim, lim.MaxFrame(wire.InlineMax), last)
	if err != nil {
		return nil, err
	}
	// The frame goes back to its pool: the storage is a copy (or was
	// received apart), and nothing else built from the frame refers to
	// its bytes.
	defer xfer.PutMsgBuf(frame)
	f, apart := split.f, split.st // apart: the inline storage, received apart
	if apart == nil {
		f, err = wire.ParseFrame(frame, lim)
	}
	if err != nil {
		return nil, l.Errorf("%w", errors.Join(err, l.DrainInit(frame)))
	}
	// fail gives back a storage received apart that no result holds.
	fail := func(err error) (*TensorDict, error) {
		if apart != nil {
			apart.Release()
		}
		return nil, l.Errorf("%w", err)
	}
	if f.Kind != wire.KindInit {
		// Only InitRemote sends on this tag: what such a header announces
		// cannot be trusted, so nothing is drained.
		return fail(fmt.Errorf("header of a %v message, want %v", f.Kind, wire.KindInit))
	}
	if f.Flags&wire.FlagKeep != 0 {
		l.Keep(&f)
	}
	if f.Flags&wire.FlagDescribed != 0 {
		if err := l.Describe(&f, lim); err != nil {
			return fail(errors.Join(err, l.DrainPayload(&f.Header)))
		}
	}
	td, stor, finish, tp, err := l.buildInit(&f, true, apart, spare)
	if err != nil {
		return fail(errors.Join(err, l.DrainPayload(&f.Header)))
	}
	if tp != last.tp {
		sizes.noteTemplate(l.Peer, tp)
	}
	if f.Inline == nil && f.Total > 0 {
		// The storage's bytes are received without marking them seen
		// (package rawbytes): a result whose bytes no user code took goes
		// back to the receive pool as soon as it is released.
		b, _ := rawbytes.Of(stor)
		var err error
		if f.Flags&wire.FlagRuns != 0 {
			err = l.recvRuns(td, b, &f.Header)
		} else {
			err = xfer.RecvChunks(l.Ctx, l.Comm, b, l.Peer, f.PayloadTag)
		}
		if err != nil {
			if errors.Is(err, xfer.ErrAbandoned) {
				// MPI may still write the storage: leave it mapped (or
				// reachable, for heap memory) and never hand it out.
				return nil, l.Errorf("receiving %d bytes of storage: %w", f.Total, errors.Join(err, l.abandonMemmap()))
			}
			return nil, l.Errorf("receiving %d bytes of storage: %w", f.Total, errors.Join(err, finish(false)))
		}
	}
	if err := finish(true); err != nil {
		return nil, l.Errorf("%w", err)
	}
	return td, nil
}

// initFrames holds, for each group, the layout of the last InitRemote
// header message received from each peer: the next one from that peer,
// often of the same structure and size, is received into a buffer of
// that size in one call into MPI (xfer.ProbeRecv), or in two parts (see
// recvInitFrame).
var initFrames = proto.Slot[initFrameSizes]{New: func() *initFrameSizes { return &initFrameSizes{} }}

// initFrameSizes is a group's initFrames state.
type initFrameSizes struct {
	mu   sync.Mutex
	last map[int]initLayout // by peer rank
}

// initLayout is the layout of an InitRemote header message: n bytes, of
// which the first head come before an inline storage of at least
// splitRecvMin bytes (head 0: no such storage), and tp, the template the
// last result from the peer was copied from with its storage (nil: none;
// see spareCopy).
type initLayout struct {
	n, head int
	tp      *treeTemplate
}

// noteTemplate records tp as the template of the last result from peer.
func (s *initFrameSizes) noteTemplate(peer int, tp *treeTemplate) {
	s.mu.Lock()
	if lay, ok := s.last[peer]; ok {
		lay.tp = tp
		s.last[peer] = lay
	}
	s.mu.Unlock()
}

// splitRecvMin is the smallest inline storage that recvInitFrame receives
// apart from its frame. Below, a copy out of the frame costs less than a
// receive in two blocks: an InitRemote of 4-8 KiB took 1.13-1.36x the time
// of raw MPI received so, against 1.02-1.17x received whole (tdmpi
// bench, three alternating runs); of 16 KiB, 8.1-8.3 us one way against
// 10.3-12.3 (1.07-1.11x raw against 1.44-1.67x, two runs).
const splitRecvMin = 16 << 10

// splitInit is an InitRemote header message received in two parts: the
// frame f, whose Inline is the storage st, received in place (st nil:
// none).
type splitInit struct {
	f  wire.Frame
	st *tensor.Storage
}

// recvInitFrame receives the header message of an InitRemote, within lim
// (maxFrame: the longest header message lim allows).
//
// When the last one from this peer had an inline storage of splitRecvMin
// bytes or more and this one has the same size (a TensorDict of the same
// structure sent again: the steady state), a blocking receive into memory
// of its own (no WithMemmap, no WithAllocator) takes it in two parts
// (mpix.MrecvConcat): the frame up to the storage into a buffer from
// xfer.MsgBuf, the storage into a new storage from the receive pool, which
// the result then views (split). Received so, a storage of 16-64 KiB
// needs no copy, and the sender can send it in the header message, in
// place (wire.InlineMax). If the header does not announce that layout after
// all, the two parts are joined, as one message is received otherwise.
//
// Otherwise the whole message goes into a buffer from xfer.MsgBuf, and
// the storage is copied out: the result then holds a storage of its own
// size, not the whole frame, which goes back to the receive pool at once
// when the result is released (from mem.PoolMin bytes, see copyStorage).
// (Receiving a large frame into memory of its own, its tail becoming the
// storage, saved the copy but left a released result's memory to the
// collector: new pages, 4-8x slower, for every InitRemote of 16-64 KiB
// sent in one message.) The size of the last frame from each peer is the
// guess of recvSized.
//
// The caller hands frame back with xfer.PutMsgBuf once it has copied
// what it needs out of it, and releases split.st (if not nil) unless a
// result holds it. A message outside lim is consumed, with what its
// header announces, and refused.
func (l *link) recvInitFrame(lim wire.Limits, maxFrame int64, last initLayout) (frame []byte, split splitInit, err error) {
	apart := last.head > 0 && l.Ctx.Done() == nil && l.o.memmap == "" && l.o.alloc == nil
	var st *tensor.Storage
	buffer := func(n int) (head, tail []byte, err error) {
		// A frame with metadata of tens of MiB is checked against the
		// memory available, as any receive of that size.
		if err := mem.CheckAvailable(int64(n)); err != nil {
			return nil, nil, err
		}
		if !apart || n != last.n {
			return xfer.MsgBuf(n), nil, nil
		}
		if st, _, err = newRecvStorage(int64(n - last.head)); err != nil {
			return nil, nil, err
		}
		tail, _ = rawbytes.Of(st) // not seen by user code (see recvInit)
		return xfer.MsgBuf(last.head), tail, nil
	}
	var guess []byte
	if !apart && last.n > 0 && int64(last.n) <= maxFrame {
		guess = xfer.MsgBuf(last.n)
	}
	frame, inGuess, err := l.RecvSized(xfer.InitHeaderTag, maxFrame, xfer.KeptFrameMax, guess, buffer,
		func(head []byte, n int64) error { return l.refuseOversized(head, n, maxFrame) })
	if !inGuess {
		xfer.PutMsgBuf(guess) // a blocking receive, or none: MPI is done with it
	}
	if err != nil {
		if !errors.Is(err, xfer.ErrAbandoned) {
			xfer.PutMsgBuf(frame) // MPI no longer writes it
			if st != nil {
				st.Release()
			}
		}
		return nil, splitInit{}, l.Errorf("%w", err)
	}
	if st != nil {
		tail, _ := rawbytes.Of(st)
		if f, ok := wire.ParseSplitFrame(frame, tail, lim); ok {
			return frame, splitInit{f: f, st: st}, nil
		}
		// Not the layout of the last frame: one buffer, as any other.
		whole := xfer.MsgBuf(len(frame) + len(tail))
		copy(whole[copy(whole, frame):], tail)
		xfer.PutMsgBuf(frame)
		st.Release()
		frame = whole
	}
	if !inGuess {
		sizes := initFrames.Of(l.Group)
		sizes.mu.Lock()
		if sizes.last == nil {
			sizes.last = map[int]initLayout{}
		}
		lay := layoutOf(frame, lim)
		lay.tp = last.tp // recvInit notes this frame's template
		sizes.last[l.Peer] = lay
		sizes.mu.Unlock()
	}
	return frame, splitInit{}, nil
}

// layoutOf returns the layout of frame, an InitRemote header message
// received whole, when it is a valid frame within lim; else only its size.
func layoutOf(frame []byte, lim wire.Limits) initLayout {
	n := len(frame)
	h, err := wire.Parse(frame, lim)
	if err != nil || h.Flags&wire.FlagInline == 0 || h.Total < splitRecvMin || wire.Size+h.Body() != int64(n) {
		return initLayout{n: n}
	}
	return initLayout{n: n, head: n - int(h.Total)}
}

// recvRuns receives into b, the storage of td (built from the frame's
// metadata), a payload that travels as runs (wire.FlagRuns): the runs of
// td's layout, which must be as many as h announces. A mismatch, or a
// run that fails, drains the messages still to come (unless the context
// ended), as RecvChunks does.
func (l *link) recvRuns(td *TensorDict, b []byte, h *wire.Header) error {
	var spans []wire.Span
	_ = td.walkLeaves(nil, func(_ Key, node *TensorDict, j int) error {
		t := node.entries[j].t
		spans = append(spans, wire.Span{Start: int64(t.Offset()), Len: int64(t.NBytes())})
		return nil
	})
	slices.SortFunc(spans, func(a, b wire.Span) int { return cmp.Compare(a.Start, b.Start) })
	runs, _ := wire.Runs(nil, nil, spans, int64(len(b)))
	if int64(len(runs)) != h.Chunks() {
		err := fmt.Errorf("the header announces %d runs, the layout of its metadata has %d: %w", h.Chunks(), len(runs), wire.ErrHeader)
		return errors.Join(err, xfer.DrainChunks(l.Comm, l.Peer, h.PayloadTag, h.Chunks()))
	}
	for i, r := range runs {
		if err := xfer.RecvExact(l.Ctx, l.Comm, b[r.Start:r.End()], l.Peer, h.PayloadTag); err != nil {
			err = fmt.Errorf("run %d of %d (bytes %d to %d): %w", i+1, len(runs), r.Start, r.End(), err)
			if l.Ctx.Err() != nil || errors.Is(err, xfer.ErrAbandoned) {
				return err
			}
			return errors.Join(err, xfer.DrainChunks(l.Comm, l.Peer, h.PayloadTag, int64(len(runs)-i-1)))
		}
	}
	return nil
}

// abandonMemmap removes the file of a WithMemmap receive that was
// abandoned in MPI (xfer.ErrAbandoned) without unmapping it: MPI may still
// write the mapping, and an unmapped page would end the process inside
// MPI. The mapping stays until the process exits.
func (l *link) abandonMemmap() error {
	if l.o.memmap == "" {
		return nil
	}
	err := os.Remove(filepath.Join(l.o.memmap, remoteMemmapFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("WithMemmap: %w", err)
	}
	return nil
}

// buildInit allocates the storage that the InitRemote header frame f
// announces (or takes its inline storage) and builds the TensorDict over
// it from f's metadata, with f's class name, before any separate payload
// arrives; finish then completes or removes a memory-mapped storage. With
// scratch, f's inline storage lies in a buffer the caller reuses: the
// result gets a copy (in the same allocation as its tree when it is
// built from a template, see treeTemplate.instantiateCopy). apart, if not
// nil, is a storage that holds f's inline storage (received apart, see
// recvInitFrame): the result views it, and the caller releases it on
// error. On error nothing else is left behind (finish has run).
func (l *link) buildInit(f *wire.Frame, scratch bool, apart *tensor.Storage, spare *spareCopy) (td *TensorDict, stor *tensor.Storage, finish func(ok bool) error, tp *treeTemplate, err error) {
	if apart != nil || scratch && len(f.Inline) > 0 && l.o.memmap == "" && l.o.alloc == nil {
		td, tp, err = fromConsolidatedCached(l.Group, apart, f.Inline, f.Meta, spare)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if len(f.Class) > 0 {
			td.class = string(f.Class)
		}
		return td, td.cons.st, func(bool) error { return nil }, tp, nil
	}
	inline := f.Inline
	if scratch && len(inline) == 0 && inline != nil {
		inline = []byte{} // not a view of the caller's buffer, even empty
	}
	if stor, finish, err = l.storageFor(f.Total, inline, f.Meta); err != nil {
		return nil, nil, nil, nil, err
	}
	td, tp, err = fromConsolidatedCached(l.Group, stor, nil, f.Meta, nil)
	if err != nil {
		return nil, nil, nil, nil, errors.Join(err, finish(false))
	}
	if len(f.Class) > 0 {
		td.class = string(f.Class)
	}
	return td, stor, finish, tp, nil
}

// refuseOversized refuses an InitRemote header message of n bytes,
// outside [wire.Size, maxFrame], which recvSized consumed (head is its
// start), and drains the payload its header announces when it can be read.
func (l *link) refuseOversized(head []byte, n, maxFrame int64) error {
	if n < wire.Size {
		return fmt.Errorf("header message of %d bytes is shorter than a header: %w", n, wire.ErrHeader)
	}
	err := fmt.Errorf("header message of %d bytes is outside [%d, %d]: %w", n, wire.Size, maxFrame, wire.ErrLimit)
	return errors.Join(err, l.DrainInit(head))
}

// storageFor returns the storage a received TensorDict of total bytes
// lives in: inline (the frame's aligned tail) when the storage came in the
// header message, else a new heap buffer; with WithMemmap a mapped file,
// with WithAllocator the allocator's storage (inline bytes are copied into
// either). A heap buffer is not cleared: the caller must fill it completely
// or drop it. finish completes the file (true) or removes it (false).
func (l *link) storageFor(total int64, inline, meta []byte) (*tensor.Storage, func(ok bool) error, error) {
	noop := func(bool) error { return nil }
	if l.o.memmap != "" {
		return createMemmapStorage(l.o.memmap, total, inline, meta)
	}
	if l.o.alloc != nil {
		st, err := allocatorStorage(l.o.alloc, total)
		if err != nil {
			return nil, nil, err
		}
		copy(st.Bytes(), inline)
		return st, noop, nil
	}
	if inline != nil {
		if len(inline) > 0 && !xfer.Aligned8(inline) {
			inline = xfer.AlignedCopy(inline)
		}
		return tensor.StorageOf(inline), noop, nil
	}
	return newRecvStorage(total)
}

// allocatorStorage calls alloc for n bytes and checks what it returns.
func allocatorStorage(alloc Allocator, n int64) (st *tensor.Storage, err error) {
	st, err = alloc(int(n))
	switch {
	case err != nil:
		return nil, fmt.Errorf("WithAllocator: allocating %d bytes: %w", n, err)
	case st == nil:
		return nil, fmt.Errorf("WithAllocator: allocating %d bytes: nil storage", n)
	case st.Released():
		return nil, fmt.Errorf("WithAllocator: allocating %d bytes: the storage was released", n)
	case int64(st.Len()) != n:
		return nil, fmt.Errorf("WithAllocator: allocating %d bytes: got a storage of %d bytes", n, st.Len())
	case n > 0 && !xfer.Aligned8(st.Bytes()):
		return nil, fmt.Errorf("WithAllocator: allocating %d bytes: the storage is not 8-byte aligned", n)
	}
	return st, nil
}

// FromRemoteInitAs receives a TensorDict as FromRemoteInit does and returns
// it as the tensorclass type T (a struct registered with RegisterClass, or
// a pointer to one), as Python tensordict's from_remote_init returns the
// sender's tensorclass. It returns an error if the sender's class name is
// registered for another type.
func FromRemoteInitAs[T any](src int, opts ...RemoteOption) (T, error) {
	td, err := FromRemoteInit(src, opts...)
	if err != nil {
		var zero T
		return zero, err
	}
	return As[T](td)
}

// remoteMemmapFile is the name of the file FromRemoteInit with WithMemmap
// writes in its prefix directory.
const remoteMemmapFile = "consolidated.td"

// createMemmapStorage creates prefix/consolidated.td, maps its first total
// bytes as the storage to receive into (copying inline into it when the
// storage came with the header) and returns it with a finish function:
// finish(true) appends the metadata JSON and its int64 little-endian
// length after the storage, which makes the file tensordict's consolidated
// single-file format, and flushes the mapping; finish(false) unmaps and
// removes the file.
func createMemmapStorage(prefix string, total int64, inline, meta []byte) (*tensor.Storage, func(bool) error, error) {
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, nil, fmt.Errorf("WithMemmap: %w", err)
	}
	path := filepath.Join(prefix, remoteMemmapFile)
	var t *tensor.Tensor
	if total > 0 {
		var err error
		t, err = memmap.Empty(tensor.Uint8, path, []int{int(total)}, memmap.ExistsOK())
		if err != nil {
			return nil, nil, fmt.Errorf("WithMemmap: %w", err)
		}
	}
	st := tensor.NewStorage(0)
	if t != nil {
		st = t.Storage()
		copy(st.Bytes(), inline)
	}
	finish := func(ok bool) error {
		if !ok {
			var errs []error
			if t != nil {
				errs = append(errs, memmap.Close(t))
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}
		trimmed := meta
		for len(trimmed) > 0 && trimmed[len(trimmed)-1] == ' ' {
			trimmed = trimmed[:len(trimmed)-1]
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o666)
		if err != nil {
			return fmt.Errorf("WithMemmap: %w", err)
		}
		tail := binary.LittleEndian.AppendUint64(append([]byte(nil), trimmed...), uint64(len(trimmed)))
		_, werr := f.WriteAt(tail, total)
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fmt.Errorf("WithMemmap: writing the metadata of %s: %w", path, err)
		}
		if t != nil {
			if err := memmap.Flush(t); err != nil {
				return fmt.Errorf("WithMemmap: %w", err)
			}
		}
		return nil
	}
	return st, finish, nil
}

// metaCaches holds each group's cache of decoded metadata (codec.Cache):
// a receive of the structure it received last costs no decoding.
var metaCaches = proto.Slot[codec.Cache]{New: func() *codec.Cache { return new(codec.Cache) }}

// fromConsolidatedCached is FromConsolidated with g's cache of decoded
// metadata, over st, or, when st is nil, over a copy of inline that it
// makes (in the same allocation as the tree, when a template builds it).
// The result is the same: views of the storage, consolidated, with
// non-tensor values of its own.
//
// A result copied from a template is made in spare when spare is memory
// for a copy of that template. tp is the template the result was copied
// from with its storage (see spareCopy), nil for any other result.
func fromConsolidatedCached(g *group.Group, st *tensor.Storage, inline, meta []byte, spare *spareCopy) (td *TensorDict, tp *treeTemplate, err error) {
	n := len(inline)
	if st != nil {
		n = st.Len()
	}
	cache := metaCaches.Of(g)
	root, class, err := cache.Decode(meta, n, codec.DefaultLimits())
	if err != nil {
		return nil, nil, err
	}
	if cache.Keeps(meta) && n <= templateMaxBytes {
		// root is in the receive cache: so is its template (see treeTemplate).
		if tp, err = templateCaches.Of(g).template(root, n); err == nil {
			if st != nil {
				td, err = tp.instantiate(st)
				tp = nil
			} else {
				td, err = tp.instantiateCopyIn(inline, spare)
				if tp.copyBlock.typ == nil {
					tp = nil
				}
			}
		}
	} else {
		if st == nil {
			if st, err = copyStorage(inline); err != nil {
				return nil, nil, err
			}
		}
		if td, err = buildFromMeta(root, st); err == nil {
			cloneNonTensors(td)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	td.cons.base, td.cons.end = 0, n
	td.class = class
	return td, tp, nil
}

// cloneNonTensors gives td's non-tensor values copies of their own.
func cloneNonTensors(td *TensorDict) {
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindNonTensor:
			e.v = cloneValue(e.v)
		case kindTD:
			cloneNonTensors(e.td)
		}
	}
}

// newRecvStorage returns the heap storage of total bytes that a receive
// builds its TensorDict in, from the receive pool (see "Communication and
// memory" in the package documentation), not cleared (the receive
// overwrites every byte, or the storage is dropped), with a finish
// function that does nothing. A storage the machine cannot hold is an
// error wrapping ErrNoMemory, before anything is allocated, instead of the
// Go runtime's fatal "out of memory" (see internal/mem.CheckAvailable).
func newRecvStorage(total int64) (*tensor.Storage, func(ok bool) error, error) {
	st, err := newFilledStorage(int(total))
	if err != nil {
		return nil, nil, err
	}
	return st, func(bool) error { return nil }, nil
}

// newFilledStorage returns a new heap storage of n bytes that its caller
// fills whole before anything reads it (a receive, Consolidate), from the
// receive pool (internal/mem): not cleared, from mem.PoolMin bytes up in a
// region that a release gives back at once when no user code saw its
// bytes (package rawbytes), else once the collector finds it unreachable,
// and from mem.HugeMin up in huge pages from end to end. A consolidated
// storage is made to be sent, often many times, and MPI reads huge pages
// faster; a new heap object advised to use them would keep the 4 KiB
// pages of the memory it reuses (see "Huge pages" in internal/mem).
func newFilledStorage(n int) (*tensor.Storage, error) {
	b, err := mem.Recv(n)
	if err != nil {
		return nil, err
	}
	return reusableStorage(b), nil
}

// reusableStorage returns a storage over b, memory from the receive pool
// (mem.Recv) that no other storage wraps, which the pool takes back once
// the storage is released (see rawbytes.Reusable).
func reusableStorage(b []byte) *tensor.Storage { return rawbytes.Reusable(b).(*tensor.Storage) }

// copyStorage returns a new storage holding a copy of b, a received
// storage in a buffer its receiver reuses: from mem.PoolMin bytes up in
// memory of the receive pool, which the result's release gives back at
// once when no user code saw its bytes (package rawbytes), else on the
// heap.
func copyStorage(b []byte) (*tensor.Storage, error) {
	if len(b) < mem.PoolMin {
		return tensor.StorageOf(xfer.AlignedCopy(b)), nil
	}
	st, err := newFilledStorage(len(b))
	if err != nil {
		return nil, err
	}
	c, _ := rawbytes.Of(st) // new: not released
	copy(c, b)
	return st, nil
}

// SetRecvPoolLimit sets the most bytes of memory the receive pool keeps
// for the next receives (memory of dropped or released results, waiting
// to be reused; memory in use is not counted), gives back what it holds
// beyond, and returns the previous limit. 0 turns reuse off. The default
// is the size in the environment variable TDMPI_RECV_POOL ("2GiB") or an
// eighth of the machine's memory. See "Communication and memory" in the
// package documentation.
func SetRecvPoolLimit(n int64) int64 { return mem.SetPoolLimit(n) }

// checkRoomFor returns an error wrapping ErrNoMemory if a receive of total
// bytes into td would need a new storage that the machine cannot hold. A
// consolidated td whose storage has total bytes may be received into
// (consolidated is WithConsolidated), so it needs none.
func checkRoomFor(td *TensorDict, consolidated bool, total int64) error {
	if consolidated && td != nil {
		if st := td.ConsolidatedStorage(); st != nil && int64(st.Len()) == total {
			return nil
		}
	}
	return mem.CheckAvailable(total)
}

// logBytes returns the bytes of td's tensor leaves for a start line (see
// runCollective); td may be nil.
func (td *TensorDict) logBytes(int) int64 { return tensorBytes(td) }

// tensorBytes returns the bytes of td's tensor leaves, or -1 for a nil td.
func tensorBytes(td *TensorDict) int64 {
	if td == nil {
		return -1
	}
	var n int64
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTensor:
			n += int64(e.t.NBytes())
		case kindTD:
			n += tensorBytes(e.td)
		}
	}
	return n
}
