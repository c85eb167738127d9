// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// initInlineMax is the largest storage InitRemote sends inside its header
// message; larger ones follow in separate payload messages.
const initInlineMax = 64 << 10

// InitRemote sends td to rank dst of the group, which builds a copy of it
// with FromRemoteInit, as tensordict's init_remote. Options: WithGroup,
// WithBroadcast, WithContext.
//
// td is laid out as Consolidate would (every leaf's bytes, 8-byte aligned,
// depth first in insertion order) and travels as one header message (the
// wire header, the tensorclass name and the consolidated metadata JSON)
// followed by the storage: inside the same message when it is at most 64
// KiB, else in messages of at most 1 GiB on a tag unique to this transfer,
// so that concurrent InitRemote calls between the same ranks never mix.
// All messages use the group's library communicator. If td is already
// consolidated its storage is sent as is; otherwise it is packed into a
// buffer first.
//
// With WithContext, a context that has already ended sends nothing, and
// one that ends during the transfer bounds it as it bounds Send: the
// header and the storage are posted at once, and given up with an error
// wrapping ctx.Err(); MPI still delivers them whole if the receiver calls
// FromRemoteInit, and keeps reading td's storage (or the packed copy)
// until then. A memory-mapped storage whose file was truncated is refused
// before anything is sent (memmap.ErrFault).
//
// With WithBroadcast every rank of the group takes part: the caller is the
// source, dst is ignored, and every other rank calls FromRemoteInit with
// WithBroadcast and this rank as src.
func (td *TensorDict) InitRemote(dst int, opts ...RemoteOption) error {
	return xfer.LogFailed("InitRemote", td.initRemote(dst, opts))
}

func (td *TensorDict) initRemote(dst int, opts []RemoteOption) error {
	if torchOn(opts) {
		return td.initRemoteTorch(dst, opts)
	}
	o := resolve(opts, usesInitSend)
	if o.broadcast && o.group != nil {
		dst = o.group.Rank()
	}
	lv, err := newLink("InitRemote", dst, "to", o)
	l := &lv
	if err != nil {
		return err
	}
	if l.o.broadcast {
		l.Dir = "root"
		if xfer.InfoOn() {
			l.LogStart(tensorBytes(td), -1)
		}
		return l.bcastSend(td)
	}
	if xfer.InfoOn() {
		l.LogStart(tensorBytes(td), xfer.InitHeaderTag)
	}
	if err := l.NotStarted(); err != nil {
		return err
	}
	if frame, ok, err := smallInitFrame(l.Op, td); err != nil {
		return l.Errorf("%w", err)
	} else if ok {
		if _, err := l.SendMessages([][]byte{frame}, []int{xfer.InitHeaderTag}, initMessageName); err != nil {
			return l.Errorf("%w", err)
		}
		return nil
	}
	sp, err := planSend(l.Op, td)
	if err != nil {
		return l.Errorf("%w", err)
	}
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Hash: signature(td), Leaves: int64(sp.leaves)}
	h.Total, h.Chunk, h.PayloadTag = int64(sp.total), wire.MaxChunk, l.Group.PayloadTag()
	if err := h.Check(senderLimits); err != nil {
		return l.Errorf("%w", err)
	}
	payload, err := sp.bytes()
	if err == nil {
		err = mem.Readable(payload) // a mapping MPI would fault on in C
	}
	if err != nil {
		return l.Errorf("the consolidated storage: %w", err)
	}
	frame := wire.AppendFrame(nil, &h, sp.class, sp.meta, nil)
	msgs, tags := xfer.AppendChunks([][]byte{frame}, []int{xfer.InitHeaderTag}, payload, h.PayloadTag)
	if _, err := l.SendMessages(msgs, tags, initMessageName); err != nil {
		return l.Errorf("%w", err)
	}
	return nil
}

// initMessageName names message i of a point-to-point InitRemote in
// errors: the header frame, then the storage chunks.
func initMessageName(i int) string {
	if i == 0 {
		return "the header"
	}
	return fmt.Sprintf("storage chunk %d", i)
}

// smallInitFrame returns the single message of an InitRemote of td when
// its storage is small enough to travel inline (ok true), built from the
// encodings Send and Recv keep with td, so that sending the same small
// TensorDict again encodes nothing.
func smallInitFrame(op string, td *TensorDict) (frame []byte, ok bool, err error) {
	s, err := p2pStateOf(op, td)
	if err != nil {
		return nil, false, err
	}
	defer s.mu.Unlock()
	if s.total > initInlineMax {
		return nil, false, nil
	}
	meta := bytes.TrimRight(s.meta, " ")
	pad := (8 - (wire.Size+len(td.class)+len(meta))%8) % 8
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated | wire.FlagInline, Total: int64(s.total),
		MetaLen: int64(len(meta) + pad), ClassLen: len(td.class), Hash: s.consHash, Leaves: int64(len(s.leaves))}
	frame = xfer.AlignedBuf(wire.Size + len(td.class) + len(meta) + pad + s.total)
	wire.Put(frame, &h)
	off := wire.Size + copy(frame[wire.Size:], td.class)
	off += copy(frame[off:], meta)
	for range pad {
		frame[off] = ' '
		off++
	}
	// The storage may be a mapping of a file another process truncated.
	err = mem.CatchFault(func() error {
		payload, err := s.payload(true)
		copy(frame[off:], payload)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("the consolidated storage: %w", err)
	}
	return frame, true, nil
}

// senderLimits checks what a sender puts in a header: the receiver's
// limits are not known, so only the structural ones apply.
var senderLimits = wire.Limits{MaxTotal: math.MaxInt64, MaxInline: initInlineMax}

// FromRemoteInit receives the TensorDict that rank src of the group sends
// with InitRemote, as tensordict's from_remote_init. Options: WithGroup,
// WithBroadcast, WithContext, WithMaxBytes, WithDevice, WithMemmap,
// WithAllocator.
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
// With WithContext, a receive still waiting for the header when the
// context ends returns an error wrapping ctx.Err(); once the header has
// arrived the transfer runs to its end.
//
// With WithMemmap(prefix), the storage is received straight into the
// memory-mapped file prefix/consolidated.td, which then holds tensordict's
// consolidated single-file format: the storage, the metadata JSON, and the
// JSON length as a little-endian int64 (Python's
// TensorDict.from_consolidated reads it). The leaves of the result view
// the mapping; nothing is copied after the receive.
func FromRemoteInit(src int, opts ...RemoteOption) (*TensorDict, error) {
	td, err := fromRemoteInit(src, opts)
	return td, xfer.LogFailed("FromRemoteInit", err)
}

func fromRemoteInit(src int, opts []RemoteOption) (*TensorDict, error) {
	if torchOn(opts) {
		return fromRemoteInitTorch(src, opts)
	}
	lv, err := newLink("FromRemoteInit", src, "from", resolve(opts, usesInitRecv))
	l := &lv
	if err != nil {
		return nil, err
	}
	if l.o.broadcast {
		l.Dir = "root"
		if src == l.Group.Rank() {
			return nil, l.Errorf("the root of a broadcast calls InitRemote, not FromRemoteInit")
		}
		l.LogStart(-1, -1)
		return l.bcastRecv()
	}
	l.LogStart(-1, xfer.InitHeaderTag)
	return l.recvInit()
}

// recvInit is the point-to-point receiving side of InitRemote.
func (l *link) recvInit() (*TensorDict, error) {
	lim := l.o.limits()
	m, st, err := xfer.Probe(l.Ctx, l.Comm, l.Peer, xfer.InitHeaderTag)
	if err != nil {
		return nil, l.Errorf("waiting for the header: %w", err)
	}
	full := lim.Resolve()
	maxFrame := int64(wire.Size) + int64(full.MaxClass) + full.MaxMeta + min(full.MaxInline, initInlineMax)
	if n := st.Bytes(); n < wire.Size || n > maxFrame {
		err := l.refuseOversized(m, n, maxFrame)
		return nil, l.Errorf("%w", err)
	}
	frame := xfer.AlignedBuf(int(st.Bytes()))
	if _, err := mpi.Mrecv(m, frame); err != nil {
		return nil, l.Errorf("receiving the header: %w", err)
	}
	f, err := wire.ParseFrame(frame, lim)
	if err != nil {
		return nil, l.Errorf("%w", errors.Join(err, l.drainRefused(frame)))
	}
	if f.Kind != wire.KindInit {
		// Only InitRemote sends on this tag: what such a header announces
		// cannot be trusted, so nothing is drained.
		return nil, l.Errorf("header of a %v message, want %v", f.Kind, wire.KindInit)
	}
	td, stor, finish, err := l.buildInit(&f)
	if err != nil {
		return nil, l.Errorf("%w", errors.Join(err, l.drainPayload(&f.Header)))
	}
	if f.Inline == nil && f.Total > 0 {
		if err := xfer.RecvChunks(l.Ctx, l.Comm, stor.Bytes(), l.Peer, f.PayloadTag); err != nil {
			return nil, l.Errorf("receiving %d bytes of storage: %w", f.Total, errors.Join(err, finish(false)))
		}
	}
	if err := finish(true); err != nil {
		return nil, l.Errorf("%w", err)
	}
	if len(f.Class) > 0 {
		td.class = string(f.Class)
	}
	return td, nil
}

// buildInit allocates the storage that the InitRemote header frame f
// announces (or takes its inline storage) and builds the TensorDict over
// it from f's metadata, before any separate payload arrives; finish then
// completes or removes a memory-mapped storage. On error nothing is left
// behind (finish has run).
func (l *link) buildInit(f *wire.Frame) (td *TensorDict, stor *tensor.Storage, finish func(ok bool) error, err error) {
	stor, finish, err = l.storageFor(f.Total, f.Inline, f.Meta)
	if err != nil {
		return nil, nil, nil, err
	}
	td, err = fromConsolidatedCached(l.Group, stor, f.Meta)
	if err != nil {
		return nil, nil, nil, errors.Join(err, finish(false))
	}
	return td, stor, finish, nil
}

// refuseOversized consumes a header message of n bytes that exceeds
// maxFrame (or is shorter than a header), draining the payload its header
// announces when that header is readable, and returns the error to report.
func (l *link) refuseOversized(m *mpi.Message, n, maxFrame int64) error {
	var head [wire.Size]byte
	if err := xfer.Discard(m, n, head[:]); err != nil {
		return fmt.Errorf("header message of %d bytes: %w", n, err)
	}
	if n < wire.Size {
		return fmt.Errorf("header message of %d bytes is shorter than a header: %w", n, wire.ErrHeader)
	}
	err := fmt.Errorf("header message of %d bytes is outside [%d, %d]: %w", n, wire.Size, maxFrame, wire.ErrLimit)
	return errors.Join(err, l.drainRefused(head[:]))
}

// drainRefused drains the payload announced by an InitRemote header this
// side refused (over its limits, say), so that a well-behaved sender is
// not left blocked: exactly the chunks the header announces, read with no
// size limit. A header that cannot be read even so, or that is not
// InitRemote's, announces nothing that can be trusted, and nothing is
// drained.
func (l *link) drainRefused(frame []byte) error {
	h, err := wire.Parse(frame, wire.Limits{MaxTotal: math.MaxInt64})
	if err != nil || h.Kind != wire.KindInit {
		return nil
	}
	return l.drainPayload(&h)
}

// drainPayload drains the separate payload of a header: h.Chunks()
// messages on its payload tag.
func (l *link) drainPayload(h *wire.Header) error {
	return xfer.DrainChunks(l.Comm, l.Peer, h.PayloadTag, h.Chunks())
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
