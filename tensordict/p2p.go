// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// ErrMismatch is wrapped by the error of a Recv (or IRecv) whose
// TensorDict differs in structure from the sender's: keys, dtypes or
// shapes of the leaves, the consolidated layout, or the transfer mode or
// tags.
var ErrMismatch = errors.New("structure mismatch")

// p2pInlineMax is the largest consolidated storage Send puts in its header
// message instead of a second message.
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
// Unlike tensordict, every Send starts with a small header message, on the
// first leaf's tag, carrying a hash of the structure and the metadata, so
// that a receiver with a different structure reports the first differing
// key instead of hanging or reading garbage. Encodings and buffers are
// kept with td between calls: once a structure is sent, further Sends
// with WithConsolidated allocate nothing.
func (td *TensorDict) Send(dst int, opts ...RemoteOption) error {
	l, err := newLink("Send", dst, "to", opts)
	if err != nil {
		return err
	}
	s, err := p2pStateOf(l.op, td)
	if err != nil {
		return l.errorf("%w", err)
	}
	defer s.mu.Unlock()
	if l.o.consolidated {
		err = s.sendConsolidated(l)
	} else {
		err = s.sendLeaves(l)
	}
	if err != nil {
		return l.errorf("%w", err)
	}
	return nil
}

// consHeader is the header of a consolidated transfer of s.
func (s *p2pState) consHeader(tag int, inline bool) wire.Header {
	h := wire.Header{Kind: wire.KindSend, Flags: wire.FlagConsolidated, Total: int64(s.total),
		MetaLen: int64(len(s.meta)), PayloadTag: tag, Hash: s.consHash, Leaves: int64(len(s.leaves))}
	if inline {
		h.Flags |= wire.FlagInline
	} else if s.total > 0 {
		h.Chunk = wire.MaxChunk
	}
	return h
}

// leavesHeader is the header of a per-leaf transfer of s.
func (s *p2pState) leavesHeader(initTag int, pseudo bool) wire.Header {
	h := wire.Header{Kind: wire.KindSend, Flags: wire.FlagPerLeaf, Total: int64(s.total),
		MetaLen: int64(len(s.meta)), PayloadTag: initTag, Hash: s.sortedHash, Leaves: int64(len(s.leaves))}
	if pseudo {
		h.Flags |= wire.FlagPseudoRandTags
	}
	return h
}

func (s *p2pState) sendConsolidated(l *link) error {
	payload, err := s.payload(true)
	if err != nil {
		return err
	}
	tag := l.o.tag
	inline := s.total <= p2pInlineMax
	h := s.consHeader(tag, inline)
	if inline {
		frame := s.sendFrame(s.total)
		wire.Put(frame, &h)
		copy(frame[wire.Size+len(s.meta):], payload)
		return mpi.Send(l.c, frame, l.peer, tag)
	}
	frame := s.sendFrame(0)
	wire.Put(frame, &h)
	if err := mpi.Send(l.c, frame, l.peer, tag); err != nil {
		return err
	}
	return sendChunks(l.c, payload, l.peer, tag)
}

func (s *p2pState) sendLeaves(l *link) error {
	if s.contiguous != nil {
		return fmt.Errorf("key %v is not contiguous; call Contiguous first", s.contiguous)
	}
	tags, err := s.leafTags(l.o.tag, l.o.pseudoRand)
	if err != nil {
		return err
	}
	h := s.leavesHeader(l.o.tag, l.o.pseudoRand)
	frame := s.sendFrame(0)
	wire.Put(frame, &h)
	if err := mpi.Send(l.c, frame, l.peer, headerTag(tags, l.o.tag)); err != nil {
		return err
	}
	for i, j := range s.sorted {
		lf := &s.leaves[j]
		b, err := lf.t.Bytes()
		if err != nil {
			return fmt.Errorf("key %v: %w", lf.key, err)
		}
		if err := mpi.Send(l.c, b, l.peer, tags[i]); err != nil {
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
// kept for later calls and copies into its leaves.
//
// If the sender's keys, dtypes or shapes differ from td's, Recv returns an
// error wrapping ErrMismatch that names the first differing key; the
// sender's data is consumed and discarded, so the sender does not hang,
// and td is left unchanged. With WithContext, a Recv whose sender has not
// started when the context ends returns an error wrapping ctx.Err().
func (td *TensorDict) Recv(src int, opts ...RemoteOption) (int, error) {
	l, err := newLink("Recv", src, "from", opts)
	if err != nil {
		return 0, err
	}
	s, err := p2pStateOf(l.op, td)
	if err != nil {
		return 0, l.errorf("%w", err)
	}
	defer s.mu.Unlock()
	var tag int
	if l.o.consolidated {
		tag, err = s.recvConsolidated(l, td)
	} else {
		tag, err = s.recvLeaves(l, td)
	}
	if err != nil {
		return 0, l.errorf("%w", err)
	}
	return tag, nil
}

// recvHeader receives the header frame on tag into s's frame buffer and
// returns the frame and its parsed header. A frame larger than the buffer
// is refused (consumed, its payload drained when readable).
func (s *p2pState) recvHeader(l *link, tag, inline int) ([]byte, wire.Header, error) {
	buf := s.recvFrame(inline)
	var n int64
	if l.o.ctx.Done() == nil {
		st, err := mpi.Recv(l.c, buf, l.peer, tag)
		if err != nil {
			if errors.Is(err, mpi.ErrTruncate) {
				return nil, wire.Header{}, errors.Join(fmt.Errorf("%w: the sender's header message is larger than this structure's (%d bytes)", ErrMismatch, len(buf)), err, l.drainRefused(buf))
			}
			return nil, wire.Header{}, err
		}
		n = st.Bytes()
	} else {
		m, st, err := probe(l.o.ctx, l.c, l.peer, tag)
		if err != nil {
			return nil, wire.Header{}, fmt.Errorf("waiting for the header: %w", err)
		}
		if st.Bytes() > int64(len(buf)) || st.Bytes() < wire.Size {
			err := l.refuseOversized(m, st.Bytes(), int64(len(buf)))
			return nil, wire.Header{}, fmt.Errorf("%w: %w", ErrMismatch, err)
		}
		n = st.Bytes()
		if _, err := mpi.Mrecv(m, buf[:n]); err != nil {
			return nil, wire.Header{}, err
		}
	}
	frame := buf[:n]
	h, err := wire.Parse(frame, l.o.limits())
	if err != nil {
		return nil, wire.Header{}, errors.Join(err, l.drainRefused(frame))
	}
	if want := wire.Size + h.Body(); want != n {
		return nil, wire.Header{}, errors.Join(fmt.Errorf("header message of %d bytes, its header announces %d", n, want), l.drainPayload(&h))
	}
	return frame, h, nil
}

func (s *p2pState) recvConsolidated(l *link, td *TensorDict) (int, error) {
	tag := l.o.tag
	inline := 0
	if s.total <= p2pInlineMax {
		inline = s.total
	}
	frame, h, err := s.recvHeader(l, tag, inline)
	if err != nil {
		return 0, err
	}
	if h.Kind != wire.KindSend || h.Flags&wire.FlagPerLeaf != 0 || h.Hash != s.consHash || h.Total != int64(s.total) || h.ClassLen != 0 {
		err := s.mismatch(td, frame, &h, false)
		return 0, errors.Join(err, l.drainPayload(&h))
	}
	dst, err := s.payload(false)
	if err != nil {
		return 0, err
	}
	if h.Flags&wire.FlagInline != 0 {
		copy(dst, frame[wire.Size+h.MetaLen:])
	} else if err := recvChunks(l.c, dst, l.peer, tag); err != nil {
		return 0, err
	}
	return tag, s.unstage()
}

func (s *p2pState) recvLeaves(l *link, td *TensorDict) (int, error) {
	tags, err := s.leafTags(l.o.tag, l.o.pseudoRand)
	if err != nil {
		return 0, err
	}
	frame, h, err := s.recvHeader(l, headerTag(tags, l.o.tag), 0)
	if err != nil {
		return 0, err
	}
	pseudo := h.Flags&wire.FlagPseudoRandTags != 0
	switch {
	case h.Kind != wire.KindSend || h.Flags&wire.FlagPerLeaf == 0 || h.Hash != s.sortedHash || h.Leaves != int64(len(s.leaves)):
		err = s.mismatch(td, frame, &h, true)
	case h.PayloadTag != l.o.tag || pseudo != l.o.pseudoRand:
		err = fmt.Errorf("%w: the sender's tags start at %d (pseudo-random %v), this Recv's at %d (pseudo-random %v)",
			ErrMismatch, h.PayloadTag, pseudo, l.o.tag, l.o.pseudoRand)
	case s.contiguous != nil:
		err = fmt.Errorf("key %v is not contiguous; call Contiguous first", s.contiguous)
	}
	if err != nil {
		return 0, errors.Join(err, l.drainLeaves(&h))
	}
	for i, j := range s.sorted {
		lf := &s.leaves[j]
		b, err := lf.t.Bytes()
		if err != nil {
			return 0, fmt.Errorf("key %v: %w", lf.key, errors.Join(err, l.drainLeaves(&h)))
		}
		st, err := mpi.Recv(l.c, b, l.peer, tags[i])
		if err != nil {
			return 0, fmt.Errorf("key %v: %w", lf.key, err)
		}
		if st.Bytes() != int64(len(b)) {
			return 0, fmt.Errorf("key %v: received %d bytes, want %d", lf.key, st.Bytes(), len(b))
		}
	}
	if len(tags) == 0 {
		return l.o.tag - 1, nil
	}
	return tags[len(tags)-1], nil
}

// mismatch explains why the sender's structure (in frame) differs from td's.
func (s *p2pState) mismatch(td *TensorDict, frame []byte, h *wire.Header, sorted bool) error {
	switch {
	case h.Kind != wire.KindSend:
		return fmt.Errorf("%w: received a %v header, want %v", ErrMismatch, h.Kind, wire.KindSend)
	case sorted && h.Flags&wire.FlagPerLeaf == 0:
		return fmt.Errorf("%w: the sender sent a consolidated storage (WithConsolidated), this Recv expects one message per leaf", ErrMismatch)
	case !sorted && h.Flags&wire.FlagPerLeaf != 0:
		return fmt.Errorf("%w: the sender sent one message per leaf, this Recv expects a consolidated storage (WithConsolidated)", ErrMismatch)
	}
	meta := frame[wire.Size+int64(h.ClassLen) : wire.Size+int64(h.ClassLen)+h.MetaLen]
	theirs, err := structureOfMeta(meta)
	if err != nil {
		return fmt.Errorf("%w: the sender's metadata is unreadable: %w", ErrMismatch, err)
	}
	mine := structureOf(td)
	if sorted {
		byKey := func(a, b structLeaf) int { return keyCompare(a.key, b.key) }
		slices.SortStableFunc(mine.leaves, byKey)
		slices.SortStableFunc(theirs.leaves, byKey)
		theirs.batch = mine.batch
	}
	if err := diff(theirs, mine); err != nil {
		return fmt.Errorf("%w: sender vs receiver: %w", ErrMismatch, err)
	}
	return fmt.Errorf("%w: same keys, dtypes and shapes, but the consolidated layouts differ (%d bytes sent, %d here)", ErrMismatch, h.Total, s.total)
}

// drainLeaves consumes the per-leaf messages the header h announces, each
// within drainIdle, so the sender of a refused transfer does not hang.
func (l *link) drainLeaves(h *wire.Header) error {
	if h.Flags&wire.FlagPerLeaf == 0 {
		return l.drainPayload(h)
	}
	pseudo := h.Flags&wire.FlagPseudoRandTags != 0
	n := int(min(h.Leaves, math.MaxInt32))
	tag := h.PayloadTag - 1
	for i := range n {
		if pseudo {
			tag = IntGenerator(tag + 1)
		} else {
			tag++
		}
		deadline := time.Now().Add(drainIdle)
		for {
			m, ok, st, err := mpi.Improbe(l.c, l.peer, tag)
			if err != nil {
				return err
			}
			if ok {
				if err := discard(m, st.Bytes(), nil); err != nil {
					return err
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("gave up draining the sender's leaf %d of %d (tag %d) after %v", i, n, tag, drainIdle)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return nil
}
