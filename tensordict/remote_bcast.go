// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
)

// bcastInlineMax is the largest storage a broadcast carries in the same
// message as the metadata.
const bcastInlineMax = 64 << 10

// InitRemote and FromRemoteInit with WithBroadcast run these steps on every
// rank, holding the group's protocol lock:
//
//  1. the root broadcasts the wire header (wire.Size bytes);
//  2. every rank checks it against its limits and the ranks agree (one
//     Allreduce) that all accept it, else all return an error;
//  3. the root broadcasts the class name, the metadata and, when small,
//     the storage, in one message;
//  4. when the storage is separate: the ranks agree that all could decode
//     the metadata and allocate the storage, then the root broadcasts it
//     in chunks of at most 1 GiB.

// bcastSend is the root's side.
func (l *link) bcastSend(td *TensorDict) error {
	return l.Group.Collective(func(busy func() bool) error {
		if err := l.Group.Broken("tensordict: " + l.Op); err != nil {
			return err
		}
		s := xfer.NewStep(l.Ctx, l.Group)
		return closeCollective(s, busy, l.bcastSendLocked(s, td, busy), l.Errorf)
	})
}

// bcastSendLocked is bcastSend inside the group's collective lock.
func (l *link) bcastSendLocked(s xfer.Step, td *TensorDict, busy func() bool) error {
	h, body, payload, err := bcastPrepare(l, td)
	if err == nil && busy() {
		err = errBusy
	}
	var hdr [wire.Size]byte
	if err == nil {
		wire.Put(hdr[:], &h)
	}
	if berr := xfer.Bcast(s, hdr[:], l.Peer); berr != nil {
		return l.Errorf("broadcasting the header: %w", errors.Join(berr, err))
	}
	if err := l.agree(s, err); err != nil {
		return err
	}
	if err := xfer.Bcast(s, body, l.Peer); err != nil {
		return l.Errorf("broadcasting the metadata: %w", err)
	}
	if h.Flags&wire.FlagInline != 0 {
		return nil
	}
	if err := l.agree(s, nil); err != nil {
		return err
	}
	if err := s.BcastChunks(payload, l.Peer); err != nil {
		return l.Errorf("broadcasting %d bytes of storage: %w", len(payload), err)
	}
	return nil
}

// bcastPrepare lays td out for a broadcast: the header, the body (class
// name, metadata and inline storage) and the separate payload, if any.
func bcastPrepare(l *link, td *TensorDict) (h wire.Header, body, payload []byte, err error) {
	if err := l.Ctx.Err(); err != nil {
		return h, nil, nil, err
	}
	sp, err := planSend(l.Op, td)
	if err != nil {
		return h, nil, nil, err
	}
	h = wire.Header{Kind: wire.KindBroadcast, Flags: wire.FlagConsolidated, Hash: signature(td),
		Leaves: int64(sp.leaves), Total: int64(sp.total), ClassLen: len(sp.class), MetaLen: int64(len(sp.meta))}
	inline := sp.total <= bcastInlineMax
	n := len(sp.class) + len(sp.meta)
	if inline {
		h.Flags |= wire.FlagInline
		n += sp.total
	} else {
		h.Chunk = wire.MaxChunk
	}
	if err := h.Check(senderLimits); err != nil {
		return h, nil, nil, err
	}
	body = xfer.AlignedBuf(n)
	off := copy(body, sp.class)
	off += copy(body[off:], sp.meta)
	// The storage may be a mapping of a file another process truncated:
	// copied in Go under CatchFault, or checked before MPI reads it in C.
	if inline {
		err = mem.CatchFault(func() error { return sp.packInto(body[off:]) })
	} else if payload, err = sp.bytes(); err == nil {
		err = mem.Readable(payload)
	}
	return h, body, payload, err
}

// bcastRecv is the side of every other rank.
func (l *link) bcastRecv() (*TensorDict, error) {
	var td *TensorDict
	err := l.Group.Collective(func(busy func() bool) error {
		if err := l.Group.Broken("tensordict: " + l.Op); err != nil {
			return err
		}
		s := xfer.NewStep(l.Ctx, l.Group)
		return closeCollective(s, busy, l.bcastRecvLocked(s, &td, busy), l.Errorf)
	})
	if err != nil {
		// td may have been built before the storage failed to arrive.
		return nil, err
	}
	return td, nil
}

// bcastRecvLocked is bcastRecv inside the group's collective lock; it sets
// *out to the result.
func (l *link) bcastRecvLocked(s xfer.Step, out **TensorDict, busy func() bool) error {
	var td *TensorDict
	defer func() { *out = td }()
	var hdr [wire.Size]byte
	if err := xfer.Bcast(s, hdr[:], l.Peer); err != nil {
		return l.Errorf("receiving the header: %w", err)
	}
	h, err := wire.Parse(hdr[:], l.o.limits())
	if err == nil && h.Kind != wire.KindBroadcast {
		err = fmt.Errorf("header of a %v message, want %v", h.Kind, wire.KindBroadcast)
	}
	if err == nil {
		err = l.Ctx.Err()
	}
	if err == nil && busy() {
		err = errBusy
	}
	if err := l.agree(s, err); err != nil {
		return err
	}
	// The body's tail is the storage of an inline transfer: memory of the
	// receive pool when large, written whole by the broadcast.
	body, merr := mem.Recv(int(h.Body()))
	if merr != nil {
		// Only a body of 64 MiB or more is checked against the memory
		// available: every rank must still take part in the broadcast.
		body = xfer.AlignedBuf(int(h.Body()))
	}
	if err := xfer.Bcast(s, body, l.Peer); err != nil {
		return l.Errorf("receiving the metadata: %w", err)
	}
	class := body[:h.ClassLen]
	meta := body[h.ClassLen : int64(h.ClassLen)+h.MetaLen]
	var inline []byte
	if h.Flags&wire.FlagInline != 0 {
		inline = body[int64(h.ClassLen)+h.MetaLen:]
	}
	st, finish, err := l.storageFor(h.Total, inline, meta)
	if err == nil {
		td, err = fromConsolidatedCached(l.Group, st, meta)
		if err != nil {
			err = errors.Join(err, finish(false))
		}
	}
	if inline == nil {
		if err := l.agree(s, err); err != nil {
			return err
		}
		if err := s.BcastChunks(st.Bytes(), l.Peer); err != nil {
			return l.Errorf("receiving %d bytes of storage: %w", h.Total, errors.Join(err, finish(false)))
		}
	} else if err != nil {
		return l.Errorf("%w", err)
	}
	if err := finish(true); err != nil {
		return l.Errorf("%w", err)
	}
	if len(class) > 0 {
		td.class = string(class)
	}
	return nil
}

// agree tells every rank of the group whether all of them can go on. local
// is this rank's own error or nil. If some rank failed, agree returns the
// local error on a rank that failed and, elsewhere, an error naming the
// lowest failing rank.
func (l *link) agree(s xfer.Step, local error) error {
	r, err := s.Agree(local != nil)
	switch {
	case err != nil:
		return l.Errorf("agreeing to go on: %w", outOfStep(errors.Join(err, local)))
	case local != nil:
		return l.Errorf("%w", local)
	case r < l.Group.Size():
		return l.Errorf("rank %d of the group could not go on (its own error says why)", r)
	}
	return nil
}
