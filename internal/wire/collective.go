// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the collectives' fixed messages. Every rank of an MPI
// collective passes the same count, so these are part of the protocol: a
// peer (or a test crafting one) must use them.
const (
	// BcastFirst is the size of the first message of Broadcast and of
	// broadcast-mode InitRemote. A TensorDict whose header, class name,
	// metadata and storage fit in it travels in that one message; larger
	// ones follow in more messages. It stays under the 4 KiB eager limit
	// of Open MPI's shared-memory transport, which counts its own headers
	// too: a broadcast of 4096 bytes took 4.0-5.1 us here, one of 4000
	// bytes 1.0-1.2 us (4032 still passed, 4064 did not).
	BcastFirst = 4000

	// BcastPrefix is the part of Broadcast's first message before the
	// frame: status (a BcastStatus), frame length, and whether more
	// messages follow, each a little-endian uint64.
	BcastPrefix = 24

	// MaxReportedError bounds the text of a rank's error that the
	// collectives' agreement passes to the other ranks (a broadcast of
	// exactly this many bytes).
	MaxReportedError = 1024

	// InlineMax is the largest storage InitRemote and Broadcast carry
	// inside their frame; a larger one follows in payload messages. Sent
	// so rather than as a frame and a storage message, an InitRemote of
	// 16-64 KiB took 9.9-12.1 us one way against 12.8-18.6 (tdmpi bench,
	// two alternating runs); at 4-8 KiB, 0.80-0.93 of the time. Passing
	// on each received 6 KiB TensorDict (the first InitRemote of each)
	// took 12.0-13.7 us one way against 15.6-19.1 (3 alternating runs).
	InlineMax = 64 << 10

	// BcastFirstMax bounds the first message of a broadcast
	// (NextBcastFirst): a longer frame is sent in parts.
	BcastFirstMax = 2 * InlineMax
)

// BcastStatus is the first field of a broadcast's first message.
type BcastStatus uint64

const (
	// BcastOK: the frame, or its first part, follows the prefix.
	BcastOK BcastStatus = 0
	// BcastFailed: the source failed; its error text follows the prefix,
	// at most MaxReportedError bytes, zero-terminated when shorter.
	BcastFailed BcastStatus = 1
	// BcastNotSent: the rank sending is not the source every rank passed
	// (a broadcast started from the last one's root); nothing follows.
	BcastNotSent BcastStatus = 2
)

// BcastHead is the prefix of a broadcast's first message.
type BcastHead struct {
	Status   BcastStatus
	FrameLen uint64 // the frame's length (BcastOK)
	More     bool   // messages follow the first (BcastOK)
}

// ParseBcastHead reads the prefix of a first message of at least
// BcastPrefix bytes. Nothing in it is checked: see BcastHead.Check.
func ParseBcastHead(first []byte) BcastHead {
	return BcastHead{
		Status:   BcastStatus(binary.LittleEndian.Uint64(first)),
		FrameLen: binary.LittleEndian.Uint64(first[8:]),
		More:     binary.LittleEndian.Uint64(first[16:]) != 0,
	}
}

// BcastFailure returns the error text of a first message whose status is
// BcastFailed (up to MaxReportedError bytes of at least BcastPrefix +
// MaxReportedError).
func BcastFailure(first []byte) string {
	return ReportedError(first[BcastPrefix : BcastPrefix+MaxReportedError])
}

// ReportedError returns a rank's error text as another rank passed it: b
// up to its first zero byte.
func ReportedError(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// PutBcastStatus writes into first, a whole first message, status and,
// for BcastFailed, the error text text (cut to MaxReportedError bytes);
// the rest is zero.
func PutBcastStatus(first []byte, status BcastStatus, text string) {
	clear(first)
	binary.LittleEndian.PutUint64(first, uint64(status))
	if status == BcastFailed {
		copy(first[BcastPrefix:BcastPrefix+MaxReportedError], text)
	}
}

// BcastMessageLen is the length of the messages that start a broadcast of
// a frame of frameLen bytes: the first message (first bytes, the prefix
// and the frame or its first part), then the rest of the frame.
func BcastMessageLen(frameLen, first int) int { return max(BcastPrefix+frameLen, first) }

// PutBcastFrame writes into msg (BcastMessageLen bytes for the frame) the
// messages that start a broadcast of the frame of h, class, meta and
// inline storage (AppendFrame): the prefix, the frame, zeros after a frame
// shorter than the first message of first bytes. more says that messages
// follow the frame (a separate storage). It returns msg.
func PutBcastFrame(msg []byte, h *Header, class string, meta, inline []byte, more bool, first int) []byte {
	frameLen := Size + len(class) + len(meta) + len(inline)
	binary.LittleEndian.PutUint64(msg, uint64(BcastOK))
	binary.LittleEndian.PutUint64(msg[8:], uint64(frameLen))
	binary.LittleEndian.PutUint64(msg[16:], 0)
	if more || BcastPrefix+frameLen > first {
		binary.LittleEndian.PutUint64(msg[16:], 1)
	}
	clear(msg[BcastPrefix+frameLen:])
	AppendFrame(msg[BcastPrefix:BcastPrefix], h, class, meta, inline)
	return msg
}

// Check checks the header h, parsed from a first message of first bytes
// from rank src, against the prefix p (BcastOK) of that message.
func (p BcastHead) Check(h *Header, src, first int) error {
	switch {
	case h.Kind != KindBroadcast:
		return fmt.Errorf("rank %d sent a %v message, not a broadcast", src, h.Kind)
	case uint64(Size+h.Body()) != p.FrameLen:
		return fmt.Errorf("rank %d announced a frame of %d bytes, its header %d", src, p.FrameLen, Size+h.Body())
	case !p.More && p.FrameLen > uint64(first-BcastPrefix):
		return fmt.Errorf("rank %d announced a frame of %d bytes in a first message of %d", src, p.FrameLen, first-BcastPrefix)
	case p.More && h.Flags&FlagInline != 0 && p.FrameLen <= uint64(first-BcastPrefix):
		return fmt.Errorf("rank %d sent inline storage in a first message and more messages", src)
	}
	return nil
}

// NextBcastFirst returns the length of the first message of a broadcast
// that follows one whose first message of first bytes started a frame of
// frameLen bytes: the last frame's length with the prefix, rounded up to
// 256 bytes (at most BcastFirstMax), or
// first while the frame fits it and fills at least half of it. A root that
// broadcasts frames of one length (one structure, the steady state) then
// sends each whole in the first message, the call two steps after the
// roots' check: that message and the agreement. A frame of up to
// 2*BcastFirst bytes stays in parts (the first message of BcastFirst, the
// agreement, the rest): on one node, two messages within Open MPI's eager
// limit for shared memory (4 KiB), with the step between, took less time
// than one message past it (16 leaves, np 2, tdmpi bench, three
// alternating pairs: 4 KiB of storage, a frame of 6 KiB, 1.70-1.88x raw in
// parts and 2.33-2.44x whole; 8 KiB 2.69-2.75x in parts and 2.25-2.35x
// whole; 16-64 KiB 1.99-2.78x and 1.89-2.17x).
func NextBcastFirst(first int, frameLen uint64) int {
	if frameLen > BcastFirstMax {
		return BcastFirst
	}
	n := BcastPrefix + int(frameLen)
	switch {
	case n <= first && 2*n >= first:
		return first
	case n <= 2*BcastFirst || n > BcastFirstMax:
		return BcastFirst
	}
	return min((n+255)&^255, BcastFirstMax)
}
