package tensordict

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// Broadcast, IBroadcast and broadcast-mode InitRemote and FromRemoteInit
// are one broadcast, which runs these steps on every rank (coll.Start
// runs them, holding the group's collective lock):
//
//  1. the ranks compare their roots, and share any rank's error that
//     stops the call before it starts (coll.Call.CheckRoot), unless the
//     last two broadcasts had one root (bcastAgree: the comparison moves
//     to step 3);
//  2. the source broadcasts the first message, wire.BcastFirst bytes or as
//     long as the last frame from this root (coll.Firsts): a prefix
//     (wire.BcastHead), then the frame (wire header, class name, metadata and, up to
//     wire.InlineMax bytes, the storage inline), or its first part, or
//     the source's error (wire.PutBcastStatus);
//  3. every receiver checks the header against its limits and the memory
//     it has, and, when the frame came whole, builds its result; the
//     ranks agree that all could (coll.Call.Conclude when nothing
//     follows, which closes the call, else coll.Call.ShareFailure);
//  4. the source broadcasts the rest of the frame, then, unless inline,
//     the storage, in chunks of at most 1 GiB (IBroadcast defers the
//     storage's); the call is closed (coll.Close).
//
// A source that failed takes no step after the first message, nor do
// the receivers, which return its error (*PeerError).

// Broadcast sends src's td to every rank of the group, like tensordict's
// broadcast: every rank calls it, and every rank returns a consolidated
// TensorDict equal to src's (its keys, batch sizes, lock state, non-tensor
// values and tensorclass name). The receivers' own td is ignored (it may be
// nil). On src the result is td itself if td is consolidated, else
// td.Consolidate(); on the others, a new TensorDict whose leaves view one
// storage, so that Send and Recv with WithConsolidated work on it.
//
// The source broadcasts a wire header, the class name and the consolidated
// metadata (JSON), with the storage when it is at most 64 KiB, else then
// the storage in pieces of at most 1 GiB. A small TensorDict (under 4000
// bytes in all) goes in a single broadcast. The
// receivers check the header against their limits (WithMaxBytes) before
// they allocate anything; if a receiver refuses, every rank returns an
// error and nothing more is sent.
//
// With WithConsolidated, a receiver whose td is consolidated with exactly
// the source's layout (same consolidated metadata, class name and storage
// size, as the result of an earlier Broadcast of the same structure is)
// receives the storage straight into td's storage, overwriting it, and
// returns td: a steady-state broadcast then allocates nothing, as
// tensordict's recv(consolidated=True). Otherwise it gets a new
// TensorDict as usual.
//
// Every rank passes the same src. The ranks compare their src first, in
// one small exchange, before anything is broadcast: ranks that passed
// different ones all return an error wrapping ErrMismatch that names the
// lowest and the highest src, and nothing is sent. A broadcast from the
// root of the group's last two, which every rank took, skips that
// exchange: the first message goes out at once from that root, and the
// ranks compare their src at the agreement that follows it, with the
// same errors, before any result is built or any TensorDict written
// (np 2, one root, 8 B to 64 KiB: 0.75-0.93x the time).
//
// Options: WithGroup, WithContext (checked before the storage moves),
// WithMaxBytes, WithConsolidated.
func (td *TensorDict) Broadcast(src int, opts ...CollectiveOption) (*TensorDict, error) {
	var out *TensorDict
	err := runCollective("Broadcast", src, td.bcastBytes(src), resolve(opts, usesBroadcast), td.broadcast(src, &out, bcastExtra{}))
	mem.Received() // a receive into the pool (see there)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IBroadcast starts Broadcast and returns its result and a Pending that
// completes it: the storage moves in MPI while the caller computes. Every
// rank of the group calls it, in the same order as its other collectives
// on the group. It returns once the receivers have the header and the
// metadata, which they check and agree on as Broadcast's receivers do (an
// error there is returned at once, on every rank); the result is then
// built over its storage, and its tensors must not be read (on the source:
// td's must not be written) until Wait, or a Test that reports completion,
// returns nil. A TensorDict whose storage travels with its metadata (at
// most 64 KiB) is complete on return. Wait is bounded by WithContext as IAllReduce's is.
// Options: those of Broadcast.
func (td *TensorDict) IBroadcast(src int, opts ...CollectiveOption) (*TensorDict, *Pending, error) {
	var out *TensorDict
	p, err := runCollectiveAsync("IBroadcast", src, td.bcastBytes(src), resolve(opts, usesBroadcast), td.broadcast(src, &out, bcastExtra{}))
	if err != nil {
		return nil, nil, err
	}
	return out, p, nil
}

// bcastBytes returns the log's byte count of a broadcast from src.
func (td *TensorDict) bcastBytes(src int) func(r int) int64 {
	return func(r int) int64 {
		if r != src {
			return -1
		}
		return tensorBytes(td)
	}
}

// bcastExtra is what broadcast-mode InitRemote and FromRemoteInit give a
// broadcast beyond Broadcast's arguments; Broadcast's is the zero value.
type bcastExtra struct {
	// refused is this rank's error that stops the call on every rank
	// before anything is broadcast (FromRemoteInit called by the root,
	// or with AnySource), or nil.
	refused error
	// storage makes a receiver's storage of total bytes (with inline, a
	// storage that came in the frame, copied in) and the function that
	// completes (true) or removes (false) it: link.storageFor, for
	// WithMemmap and WithAllocator. nil: the receive pool's memory.
	storage func(total int64, inline, meta []byte) (*tensor.Storage, func(ok bool) error, error)
}

// broadcast returns the body of a broadcast from src (see the steps
// above), which sets *out to the result; td is the source's TensorDict
// or, on a receiver, the one WithConsolidated receives into.
func (td *TensorDict) broadcast(src int, out **TensorDict, x bcastExtra) func(cl *coll.Call) error {
	return func(cl *coll.Call) error {
		root, a := src, bcastAgree{steady: -1}
		if steady := coll.FirstsOf(cl.Group).TakeSteady(); steady >= 0 {
			root, a = steady, bcastAgree{steady: steady, src: src, refused: x.refused}
		}
		for {
			if a.steady < 0 {
				if err := cl.CheckRoot("src", src, x.refused); err != nil {
					return err
				}
			}
			var restart bool
			var err error
			if cl.Rank == root {
				*out, restart, err = bcastSend(cl, td, a)
			} else {
				*out, restart, err = bcastRecv(cl, td, root, x.storage, a)
			}
			if !restart {
				return err
			}
			root, a = src, bcastAgree{steady: -1} // every rank passed src
		}
	}
}

// bcastAgree says how a broadcast's ranks agree once its first message
// has moved. A broadcast from the same root as the last two every rank
// agreed on (steady, the same on every rank) starts from that root
// without the step that compares the roots: the roots (src, the one this
// rank passed) are compared at that agreement instead (coll.Call.
// ConcludeRoot), with refused, this rank's error that stops the call. A
// steady root that was not passed as src sends a first message that says
// so (wire.BcastNotSent), and a receiver that passed another src builds
// nothing. When every rank passed the same other root, the ranks start
// again from the root check. steady is -1 for a broadcast whose roots
// were compared first.
type bcastAgree struct {
	steady, src int
	refused     error
}

// conclude is the agreement after the first message: Conclude when
// nothing follows (last), else ShareFailure, or, from a steady root,
// ConcludeRoot.
func (a bcastAgree) conclude(cl *coll.Call, local error, last bool) (restart bool, err error) {
	switch {
	case a.steady >= 0:
		if local == nil {
			local = a.refused
		}
		return cl.ConcludeRoot("src", a.src, a.steady, local, last)
	case last:
		return false, cl.Conclude(local)
	}
	return false, cl.ShareFailure(local)
}

// differs reports whether this rank passed a root other than the steady
// one it receives from: it builds nothing.
func (a bcastAgree) differs() bool { return a.steady >= 0 && a.src != a.steady }

// bcastSend is a broadcast on the source rank (or the steady root, a).
func bcastSend(cl *coll.Call, td *TensorDict, a bcastAgree) (*TensorDict, bool, error) {
	firsts := coll.FirstsOf(cl.Group)
	first := firsts.Of(cl.Rank)
	if a.differs() {
		// The others wait for this rank's first message all the same.
		msg := make([]byte, first)
		wire.PutBcastStatus(msg, wire.BcastNotSent, "")
		if err := xfer.Bcast(cl.Step, msg, cl.Rank); err != nil {
			return nil, false, cl.Errorf("telling the other ranks that rank %d is not the source: %w", cl.Rank, err)
		}
		restart, err := a.conclude(cl, nil, true)
		return nil, restart, err
	}
	tdc, msg, storage, err := bcastFrame(cl, td, first)
	if err == nil && a.steady >= 0 {
		err = a.refused
	}
	if err != nil {
		// Tell the receivers, which are waiting for the first message.
		fail := make([]byte, first)
		wire.PutBcastStatus(fail, wire.BcastFailed, err.Error())
		if berr := xfer.Bcast(cl.Step, fail, cl.Rank); berr != nil {
			return nil, false, cl.Errorf("%w (and telling the other ranks failed: %v)", err, berr)
		}
		return nil, false, cl.Wrap(err)
	}
	holdConsolidated(tdc, &cl.Held) // MPI reads its storage
	// msg goes back to the pool once every step that reads it has
	// completed (before any is deferred); a step given up leaves it to MPI.
	if err := xfer.Bcast(cl.Step, msg[:first], cl.Rank); err != nil {
		return nil, false, cl.Errorf("broadcasting the header: %w", err)
	}
	frameLen := wire.ParseBcastHead(msg).FrameLen
	if len(msg) == first && storage == nil {
		xfer.PutMsgBuf(msg)
		if _, err := a.conclude(cl, nil, true); err != nil {
			return nil, false, err
		}
		firsts.Agreed(cl.Rank, first, frameLen)
		return tdc, false, nil
	}
	if _, err := a.conclude(cl, cl.Ready(), false); err != nil {
		xfer.PutMsgBuf(msg)
		return nil, false, err
	}
	firsts.Agreed(cl.Rank, first, frameLen)
	if err := cl.BcastChunks(msg[first:], cl.Rank); err != nil {
		return nil, false, cl.Errorf("broadcasting the metadata: %w", err)
	}
	xfer.PutMsgBuf(msg)
	cl.Defer() // IBroadcast: the storage (none when inline) is left to Wait
	if err := cl.BcastChunks(storage, cl.Rank); err != nil {
		return nil, false, cl.Errorf("broadcasting the storage: %w", err)
	}
	return tdc, false, nil
}

// bcastFrame consolidates td and lays out its frame (the header, class
// name and metadata, with the storage inline when all of it fits in the
// first message) in the messages that start the broadcast (see
// wire.PutBcastFrame). It returns the storage to send separately, or nil.
func bcastFrame(cl *coll.Call, td *TensorDict, first int) (tdc *TensorDict, msg, storage []byte, err error) {
	if td == nil {
		return nil, nil, nil, fmt.Errorf("nil tensordict on the source rank")
	}
	if err := cl.Ready(); err != nil {
		return nil, nil, nil, err
	}
	tdc, class, meta, st, leaves, err := bcastSource(cl.Op, td)
	if err != nil {
		return nil, nil, nil, err
	}
	// MPI reads st in C, where a fault (a mapped file another process
	// truncated) cannot be caught: check first.
	if err := mem.Readable(st); err != nil {
		return nil, nil, nil, err
	}
	h := wire.Header{Kind: wire.KindBroadcast, Flags: wire.FlagConsolidated, Leaves: int64(leaves)}
	var inline []byte
	if len(st) <= wire.InlineMax {
		inline = st
		if inline == nil {
			inline = []byte{}
		}
	} else {
		h.Total = int64(len(st))
		if len(st) > 0 {
			h.Chunk = wire.MaxChunk
		}
		storage = st
	}
	msg = xfer.MsgBuf(wire.BcastMessageLen(wire.Size+len(class)+len(meta)+len(inline), first)) // for bcastSend to give back
	msg = wire.PutBcastFrame(msg, &h, class, meta, inline, storage != nil, first)
	return tdc, msg, storage, nil
}

// bcastSource returns what the source of a Broadcast sends of td: tdc,
// td's consolidated form (td itself when consolidated), its class name,
// metadata and storage, and its leaf count. A consolidated TensorDict
// whose storage is whole in its planned layout is not laid out again when
// it was sent before (InitRemote, Broadcast: from its Send/Recv state, on
// its second send and after) or when it is a received result passed on
// unchanged (from its template's encoding, on its first). Laying out a
// TensorDict of 16 leaves took 2.5-3 us of the 6.2 us of a Broadcast of
// 1 KiB, one way (np 2, the source alternating, each passing on what it
// received).
func bcastSource(op string, td *TensorDict) (tdc *TensorDict, class string, meta, st []byte, leaves int, err error) {
	if c := td.cons; c != nil && c.base == 0 && c.end == c.st.Len() && !c.st.Released() {
		if td.p2p.Load() == nil && !td.initSent.Swap(true) {
			if td.tmpl != nil { // a received result (sendEncoding checks that it is unchanged)
				enc, sp, err := sendEncoding(op, td)
				if err != nil {
					return nil, "", nil, nil, 0, err
				}
				if sp == nil || sp.storage != nil { // the encoding describes c.st as it lies
					var st []byte
					if sp == nil {
						// Passed on unchanged (see passedOn): read without
						// marking it seen, so that its release can still
						// give its region back to the receive pool.
						st, _ = rawbytes.Of(c.st)
					} else {
						st = c.st.Bytes()
					}
					return td, enc.class, bytes.TrimRight(enc.meta, " "), st, int(enc.leaves), nil
				}
			}
		} else if meta, leaves, ok := stateLayout(op, td); ok {
			return td, td.class, meta, c.st.Bytes(), leaves, nil
		}
	}
	if tdc, err = td.Consolidate(); err != nil {
		return nil, "", nil, nil, 0, err
	}
	if meta, err = tdc.ConsolidatedMetadata(); err != nil {
		return nil, "", nil, nil, 0, err
	}
	return tdc, tdc.ClassName(), meta, tdc.ConsolidatedStorage().Bytes(), countTensorLeaves(tdc), nil
}

// stateLayout returns the consolidated metadata and the leaf count of td
// from its Send/Recv state (p2pStateOf), which keeps them between calls:
// ok when td is whole in its consolidated storage, laid out as planned,
// and no other call holds the state. The metadata is not written after
// (a changed TensorDict gets new metadata in its state).
func stateLayout(op string, td *TensorDict) (meta []byte, leaves int, ok bool) {
	c := td.cons
	if c == nil || c.base != 0 || c.end != c.st.Len() || c.st.Released() {
		return nil, 0, false
	}
	s, locked, err := tryP2PStateOf(op, td)
	if !locked || s == nil {
		return nil, 0, false
	}
	defer s.mu.Unlock()
	if err != nil || s.st != c.st || s.base != 0 || s.total != c.end {
		return nil, 0, false
	}
	return s.meta[:s.metaLen], len(s.leaves), true
}

// countLeaves returns the number of tensor leaves of td.
func countTensorLeaves(td *TensorDict) int {
	n := 0
	_ = td.walkLeaves(nil, func(Key, *TensorDict, int) error { n++; return nil })
	return n
}

// bcastRecv is a broadcast on a receiving rank; td is the receiver's own
// TensorDict, reused with WithConsolidated, and storage, if not nil,
// makes the result's storage (see bcastExtra).
func bcastRecv(cl *coll.Call, td *TensorDict, src int, storage func(int64, []byte, []byte) (*tensor.Storage, func(bool) error, error), a bcastAgree) (*TensorDict, bool, error) {
	firsts := coll.FirstsOf(cl.Group)
	firstLen := firsts.Of(src)
	first := xfer.MsgBuf(firstLen) // written whole by the broadcast
	if err := xfer.Bcast(cl.Step, first, src); err != nil {
		// A step given up leaves first to MPI: it is not pooled again.
		return nil, false, cl.Errorf("receiving the header from rank %d: %w", src, err)
	}
	defer xfer.PutMsgBuf(first) // what is built from it copies its bytes
	body := first[wire.BcastPrefix:]
	p := wire.ParseBcastHead(first)
	switch {
	case p.Status == wire.BcastNotSent || p.Status == wire.BcastOK && a.differs():
		// Not the broadcast the root, or this rank, meant: the agreement
		// compares the roots.
		restart, err := a.conclude(cl, nil, !p.More)
		return nil, restart, err
	case p.Status != wire.BcastOK: // the source takes no more steps
		return nil, false, cl.Errorf("%w", &PeerError{Op: cl.Op, Rank: src, Msg: wire.BcastFailure(first)})
	}
	frameLen, more := p.FrameLen, p.More
	h, err := wire.Parse(body, cl.Lim)
	if err == nil {
		err = p.Check(&h, src, firstLen)
	}
	if err != nil {
		err = fmt.Errorf("from rank %d: %w", src, err)
	} else {
		err = cl.Ready()
	}
	if !more {
		out, err := bcastRecvWhole(cl, td, src, body, frameLen, storage, err, a, func() { firsts.Agreed(src, firstLen, frameLen) })
		return out, false, err
	}
	if err == nil {
		err = checkRoomFor(td, cl.Consolidated, h.Total)
	}
	if _, err := a.conclude(cl, err, false); err != nil {
		return nil, false, err
	}
	firsts.Agreed(src, firstLen, frameLen)
	frame := make([]byte, frameLen)
	n := copy(frame, body)
	if err := cl.BcastChunks(frame[n:], src); err != nil {
		return nil, false, cl.Errorf("receiving the metadata from rank %d: %w", src, err)
	}
	f, err := wire.ParseFrame(frame, cl.Lim)
	if err != nil {
		return nil, false, cl.Errorf("from rank %d: %w", src, err)
	}
	if h.Flags&wire.FlagInline != 0 {
		out, reuse, finish, err := bcastBuild(cl, td, src, &f, storage)
		if err != nil {
			return nil, false, cl.Wrap(err)
		}
		out, err = bcastFinish(cl, td, f.Inline, out, reuse, finish)
		return out, false, err
	}
	reuse := cl.Consolidated && sameLayout(td, f.Meta, string(f.Class), h.Total)
	var st *tensor.Storage
	finish := func(bool) error { return nil }
	switch {
	case reuse:
		st = td.cons.st // sameLayout found it whole and consolidated
	case storage != nil:
		st, finish, err = storage(h.Total, nil, f.Meta)
		if err != nil {
			st, finish = nil, func(bool) error { return nil }
		}
	}
	if st == nil {
		// The broadcast fills it whole, or st is dropped.
		var aerr error
		if st, _, aerr = newRecvStorage(h.Total); aerr != nil {
			// checkRoomFor passed on every rank: only the pool's own check
			// (of whole huge pages) refused, or storage did, and this rank
			// cannot leave the broadcast now.
			st = tensor.StorageOf(make([]byte, h.Total))
		}
	}
	_ = cl.Held.Add(st) // MPI writes it: released, st.Bytes below refuses it
	cl.Defer()          // IBroadcast: the storage is left to Wait
	// A new storage that MPI fills before the call returns is received
	// without marking it seen (package rawbytes): a result nobody read
	// goes back to the receive pool at its release. td's own storage, and
	// one that MPI writes after the call (IBroadcast), are seen, so that
	// their release never hands them out while MPI may still write them.
	var b []byte
	if reuse || cl.DeferSteps {
		b = st.Bytes()
	} else {
		b, _ = rawbytes.Of(st)
	}
	if berr := cl.BcastChunks(b[:h.Total], src); berr != nil {
		return nil, false, cl.Errorf("receiving the storage from rank %d: %w", src, errors.Join(berr, finish(false)))
	}
	if err != nil {
		return nil, false, cl.Wrap(errors.Join(err, finish(false)))
	}
	if reuse {
		return td, false, nil
	}
	out, err := rebuild(cl, src, st, nil, f.Meta, string(f.Class))
	if err == nil {
		err = finish(true)
	} else {
		err = errors.Join(err, finish(false))
	}
	if err != nil {
		return nil, false, cl.Wrap(err)
	}
	return out, false, nil
}

// bcastRecvWhole ends bcastRecv when the frame came whole in the first
// message, its body, frameLen bytes: it builds the result (bcastBuild),
// and the ranks agree that all could (coll.Call.Conclude), which closes
// the call, and then calls agreed. err is this rank's error so far.
func bcastRecvWhole(cl *coll.Call, td *TensorDict, src int, body []byte, frameLen uint64, storage func(int64, []byte, []byte) (*tensor.Storage, func(bool) error, error), err error, a bcastAgree, agreed func()) (*TensorDict, error) {
	var f wire.Frame
	if err == nil {
		if f, err = wire.ParseFrame(body[:frameLen], cl.Lim); err != nil {
			err = fmt.Errorf("from rank %d: %w", src, err)
		}
	}
	var out *TensorDict
	reuse := false
	finish := func(bool) error { return nil }
	if err == nil {
		out, reuse, finish, err = bcastBuild(cl, td, src, &f, storage)
	}
	if _, err := a.conclude(cl, err, true); err != nil {
		if out != nil {
			err = errors.Join(err, finish(false))
		}
		return nil, err
	}
	agreed()
	return bcastFinish(cl, td, f.Inline, out, reuse, finish)
}

// bcastBuild makes the result of a broadcast whose frame f from src holds
// the storage inline: with WithConsolidated, td when it is laid out as
// the source's TensorDict (reuse, its storage not yet written); else a
// new TensorDict over a storage from storage (see bcastExtra) or over a
// copy of f.Inline, with the function that completes (true) or removes
// (false) that storage.
func bcastBuild(cl *coll.Call, td *TensorDict, src int, f *wire.Frame, storage func(int64, []byte, []byte) (*tensor.Storage, func(bool) error, error)) (out *TensorDict, reuse bool, finish func(bool) error, err error) {
	finish = func(bool) error { return nil }
	if cl.Consolidated && sameLayout(td, f.Meta, string(f.Class), int64(len(f.Inline))) {
		return nil, true, finish, nil
	}
	var st *tensor.Storage
	if storage != nil {
		if st, finish, err = storage(int64(len(f.Inline)), f.Inline, f.Meta); err != nil {
			return nil, false, func(bool) error { return nil }, err
		}
	}
	// Without st, the result gets a copy of the storage, 8-byte aligned,
	// in one allocation with its tree when a template builds it.
	if out, err = rebuild(cl, src, st, f.Inline, f.Meta, string(f.Class)); err != nil {
		return nil, false, finish, errors.Join(err, finish(false))
	}
	return out, false, finish, nil
}

// bcastFinish completes a result bcastBuild made once every rank took
// the frame: it writes inline into td's storage when reused, else
// completes the result's storage.
func bcastFinish(cl *coll.Call, td *TensorDict, inline []byte, out *TensorDict, reuse bool, finish func(bool) error) (*TensorDict, error) {
	if reuse {
		copy(td.cons.st.Bytes(), inline)
		return td, nil
	}
	if err := finish(true); err != nil {
		return nil, cl.Wrap(err)
	}
	return out, nil
}

// sameLayout reports whether td is consolidated with exactly the metadata
// meta, class name class and a storage of total bytes, so that receiving
// the sender's storage into td's makes td equal to the sender's TensorDict.
// It is true only when td.cons.st is that storage.
func sameLayout(td *TensorDict, meta []byte, class string, total int64) bool {
	if td == nil || td.ClassName() != class {
		return false
	}
	if mine, _, ok := stateLayout("Broadcast", td); ok {
		return int64(td.cons.end) == total && bytes.Equal(mine, meta)
	}
	st := td.ConsolidatedStorage()
	if st == nil || int64(st.Len()) != total {
		return false
	}
	mine, err := td.ConsolidatedMetadata()
	return err == nil && bytes.Equal(mine, meta)
}

// rebuild makes the TensorDict a peer sent: meta over st or, when st is
// nil, over a copy of inline, with class name class. Metadata the group
// received lately is not decoded again, and a small tree is copied from
// its template, as FromRemoteInit does (fromConsolidatedCached): the
// ranks of an AllGather, or a loop of Broadcasts, send the same
// structure. Its errors name from, without the op prefix.
func rebuild(cl *coll.Call, from int, st *tensor.Storage, inline, meta []byte, class string) (*TensorDict, error) {
	if int64(len(meta)) > cl.Lim.MaxMeta {
		return nil, fmt.Errorf("from rank %d: metadata is %d bytes, limit %d: %w", from, len(meta), cl.Lim.MaxMeta, ErrLimit)
	}
	if st != nil && st.Released() {
		return nil, fmt.Errorf("from rank %d: %w", from, tensor.ErrReleased)
	}
	td, _, err := fromConsolidatedCached(cl.Group, st, inline, meta, nil)
	if err != nil {
		return nil, fmt.Errorf("from rank %d: %w", from, err)
	}
	if class != "" {
		td.class = class // not an edit: see templateEncoding
	}
	return td, nil
}

// InitRemote and FromRemoteInit with WithBroadcast are a broadcast (see
// TensorDict.broadcast) whose root is the caller of InitRemote: its
// result is dropped there, and the receivers build theirs with their
// own options (WithMaxBytes, WithMemmap, WithAllocator).

// broadcastMode reports whether opts make InitRemote and FromRemoteInit
// a broadcast of tdmpi's (WithBroadcast without WithTorch, whose
// broadcast is torch's).
func broadcastMode(opts []RemoteOption) bool {
	bcast := false
	for _, p := range opts {
		if v, ok := p.(option); ok {
			switch v.kind {
			case optTorch:
				return false
			case optBroadcast:
				bcast = true
			}
		}
	}
	return bcast
}

// initBroadcast is InitRemote with WithBroadcast: a broadcast from the
// caller's rank.
func (td *TensorDict) initBroadcast(opts []RemoteOption) error {
	o := resolve(opts, usesInitSend)
	root := -1 // no group: the options' check refuses the call
	if o.group != nil {
		root = o.group.Rank()
	}
	var out *TensorDict
	return runCollective("InitRemote", root, td.bcastBytes(root), o, td.broadcast(root, &out, bcastExtra{}))
}

// fromBroadcast is FromRemoteInit with WithBroadcast: a broadcast from
// src.
func fromBroadcast(src int, opts []RemoteOption) (*TensorDict, error) {
	o := resolve(opts, usesInitRecv)
	var x bcastExtra
	switch {
	case src == AnySource:
		x.refused = errors.New("AnySource is point to point: a broadcast (WithBroadcast) names its root")
	case o.group != nil && src == o.group.Rank():
		x.refused = errors.New("the root of a broadcast calls InitRemote, not FromRemoteInit")
	}
	if o.memmap != "" || o.alloc != nil {
		x.storage = (&link{o: o}).storageFor
	}
	var td *TensorDict
	err := runCollective("FromRemoteInit", src, nil, o, (*TensorDict)(nil).broadcast(src, &td, x))
	mem.Received() // see there: after this one, what the caller drops can come back
	if err != nil {
		return nil, err
	}
	return td.receivedFrom(src), nil
}
