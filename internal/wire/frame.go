// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import "fmt"

// Frame is a parsed message: a header and the sections that follow it,
// each a subslice of the message (nothing is copied).
type Frame struct {
	Header
	Class  []byte // tensorclass name, empty for a plain TensorDict
	Meta   []byte // metadata
	Inline []byte // the storage when FlagInline is set, else nil
}

// ParseFrame parses a whole message: the header, checked against lim, and
// the sections it announces, which must fill msg exactly.
func ParseFrame(msg []byte, lim Limits) (Frame, error) {
	h, err := Parse(msg, lim)
	if err != nil {
		return Frame{}, err
	}
	// Each section is bounded by the limits, so the sum cannot overflow.
	if want := Size + h.Body(); int64(len(msg)) != want {
		return Frame{}, &HeaderError{Field: "length", Reason: fmt.Sprintf("message of %d bytes, header announces %d", len(msg), want)}
	}
	return FrameOf(h, msg[Size:]), nil
}

// FrameOf returns the frame of the header h, checked, whose body (class
// name, metadata and inline storage, which follow the header) is body,
// at least h.Body() bytes long. Nothing is copied.
func FrameOf(h Header, body []byte) Frame {
	f := Frame{Header: h}
	f.Class, body = body[:h.ClassLen:h.ClassLen], body[h.ClassLen:]
	f.Meta, body = body[:h.MetaLen:h.MetaLen], body[h.MetaLen:]
	if h.Flags&FlagInline != 0 {
		f.Inline = body[:h.Total:h.Total]
	}
	return f
}

// ParseSplitFrame parses a message received in two parts, head and then
// tail, as ParseFrame parses their concatenation, when tail is exactly the
// inline storage: the header, checked against lim, announces FlagInline
// and a storage of len(tail) bytes, and its class name and metadata fill
// the rest of head. The frame's Inline is tail; nothing is copied. ok is
// false when the message is not laid out so, for whatever reason (an
// unreadable header too): the caller then joins the two parts and calls
// ParseFrame, which says what is wrong, if anything.
func ParseSplitFrame(head, tail []byte, lim Limits) (f Frame, ok bool) {
	h, err := Parse(head, lim)
	if err != nil || h.Flags&FlagInline == 0 || h.Total != int64(len(tail)) || Size+h.Body() != int64(len(head))+int64(len(tail)) {
		return Frame{}, false
	}
	sections := h
	sections.Flags &^= FlagInline
	f = FrameOf(sections, head[Size:])
	f.Header, f.Inline = h, tail[:len(tail):len(tail)]
	if f.Inline == nil {
		f.Inline = []byte{} // present, empty
	}
	return f, true
}

// AppendFrame appends a header for h followed by class, meta and inline to
// b. It sets h.ClassLen and h.MetaLen from the sections, and FlagInline and
// h.Total when inline is not nil.
func AppendFrame(b []byte, h *Header, class string, meta, inline []byte) []byte {
	h.ClassLen = len(class)
	h.MetaLen = int64(len(meta))
	if inline != nil {
		h.Flags |= FlagInline
		h.Total = int64(len(inline))
	}
	b = Append(b, h)
	b = append(b, class...)
	b = append(b, meta...)
	return append(b, inline...)
}
