// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// Drains. A receiver that refuses a transfer (over its limits, another
// structure, a released storage) still takes every message its header
// announces, exactly those, and throws them away: its sender is then not
// left blocked in a send nobody receives, and no message of the refused
// transfer stays queued for a later receive to take.

// Discard receives the matched message m of n bytes and throws it away.
// The receive is exact, never truncated: Open MPI's single-copy path does
// not bound a truncated rendezvous receive by the buffer size. Small
// messages land on the stack, larger ones in a scratch anonymous mapping
// that is unmapped at once. head, if not nil, gets the message's first
// bytes.
func Discard(m *mpi.Message, n int64, head []byte) error {
	if n <= 0 {
		_, err := mpi.Mrecv(m, []byte(nil))
		return err
	}
	if n <= 4096 {
		var sink [4096]byte
		_, err := mpi.Mrecv(m, sink[:n])
		copy(head, sink[:n])
		return err
	}
	buf, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("mapping %d bytes to Discard a message: %w", n, err)
	}
	_, err = mpi.Mrecv(m, buf)
	copy(head, buf)
	return errors.Join(err, unix.Munmap(buf))
}

// DrainIdle is how long a drain waits for each message it was told to
// expect before giving up on the rest.
const DrainIdle = 2 * time.Second

// DrainMessages consumes, in order, n messages from src, the i-th on tag
// tagOf(i): exactly the messages a refused transfer still owes, so that
// its sender is not left blocked and nothing of it stays queued for a
// later receive to take. A header can announce messages that never come
// (a faulty or hostile sender), so DrainMessages waits at most DrainIdle
// for each and then gives up with an error saying so; it never takes more
// than n messages.
func DrainMessages(c *mpi.Comm, src int, n int64, tagOf func(i int64) int) error {
	for i := range n {
		tag := tagOf(i)
		ctx, cancel := context.WithTimeout(context.Background(), DrainIdle)
		var m mpi.Message
		st, err := Probe(ctx, c, src, tag, &m)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("draining the refused transfer: message %d of %d (tag %d) did not come within %v", i+1, n, tag, DrainIdle)
			}
			return fmt.Errorf("draining the refused transfer: message %d of %d (tag %d): %w", i+1, n, tag, err)
		}
		if err := Discard(&m, st.Bytes(), nil); err != nil {
			return fmt.Errorf("draining the refused transfer: message %d of %d (tag %d): %w", i+1, n, tag, err)
		}
	}
	return nil
}

// DrainChunks consumes the n payload messages on tag (see DrainMessages).
func DrainChunks(c *mpi.Comm, src, tag int, n int64) error {
	return DrainMessages(c, src, n, func(int64) int { return tag })
}

// DrainSend consumes what a Send transfer this side refused still owes,
// exactly as its header h announces: the metadata message on tag0 when
// body is true (it was not received), then the storage chunks
// (consolidated) or the per-leaf messages from the from-th on, on the
// sender's tags.
func (l *Link) DrainSend(h *wire.Header, tag0 int, body bool, from int64) error {
	if body {
		if err := DrainChunks(l.Comm, l.Peer, tag0, 1); err != nil {
			return err
		}
	}
	if h.Flags&wire.FlagPerLeaf == 0 {
		return DrainChunks(l.Comm, l.Peer, tag0, h.Chunks())
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
	return DrainMessages(l.Comm, l.Peer, h.Leaves-min(from, h.Leaves), func(int64) int { return next() })
}

// DrainInit drains the payload announced by an InitRemote header message
// this side refused (over its limits, say), whose start is frame: exactly
// the chunks the header announces, read with no size limit. A header that
// cannot be read even so, or that is not InitRemote's, announces nothing
// that can be trusted, and nothing is drained. When frame is a whole
// frame that asks to be kept (wire.FlagKeep), its structure is kept all
// the same: the sender describes the next frames of it by its ref.
func (l *Link) DrainInit(frame []byte) error {
	h, err := wire.Parse(frame, wire.Limits{MaxTotal: math.MaxInt64})
	if err != nil || h.Kind != wire.KindInit {
		return nil
	}
	if h.Flags&wire.FlagKeep != 0 && int64(len(frame)) == wire.Size+h.Body() {
		f := wire.FrameOf(h, frame[wire.Size:])
		l.Keep(&f)
	}
	return l.DrainPayload(&h)
}

// DrainPayload drains the payload of an InitRemote header h that travels
// apart from its frame: h.Chunks() messages on its payload tag.
func (l *Link) DrainPayload(h *wire.Header) error {
	return DrainChunks(l.Comm, l.Peer, h.PayloadTag, h.Chunks())
}
