// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

// RunMin is the smallest leaf that travels in place, as a run of its own,
// in a payload with FlagRuns. A smaller leaf is copied into a run with its
// neighbours: sending a leaf apart costs a message, copying it a pass
// over its bytes. tdmpi bench initremote-set, np 2, three alternating
// runs, against 64 KiB: leaves of 16 KiB and 32 KiB sent in place took
// 0.68x and 0.32x the time (they were packed at 64 KiB); against 16 KiB,
// leaves of 4 KiB in place took 2.8x (8 KiB: 0.84x, within the noise),
// and 256 KiB, packing leaves of 64-128 KiB, took 1.5-2.2x.
const RunMin = 16 << 10

// A Span is a range of bytes of a consolidated storage: Len bytes from
// Start.
type Span struct {
	Start, Len int64
}

// End returns the offset just past s.
func (s Span) End() int64 { return s.Start + s.Len }

// Runs appends to dst the runs that a storage of total bytes travels in
// with FlagRuns, given its leaves' spans in storage order (each within
// [0, total], in increasing order, not overlapping): each leaf of RunMin
// bytes or more in pieces of at most MaxChunk bytes, and the bytes between
// them (smaller leaves, pads, gaps) in runs of at most MaxChunk bytes that
// each hold whole leaves (cut at the start of a leaf). The runs tile
// [0, total) in order. inPlace reports, for each run appended, whether it
// is a piece of a leaf (to send from the leaf's memory) rather than bytes
// to pack; it may be nil. Sender and receiver compute the runs from the
// same layout, so the receiver knows each message's place and size before
// it arrives.
func Runs(dst []Span, inPlace []bool, leaves []Span, total int64) ([]Span, []bool) {
	add := func(s Span, leaf bool) {
		dst = append(dst, s)
		if inPlace != nil {
			inPlace = append(inPlace, leaf)
		}
	}
	cur := int64(0) // where the run of packed bytes in progress starts
	for _, l := range leaves {
		if l.Len >= RunMin {
			if l.Start > cur {
				add(Span{Start: cur, Len: l.Start - cur}, false)
			}
			for off := l.Start; off < l.End(); off += MaxChunk {
				add(Span{Start: off, Len: min(l.End()-off, MaxChunk)}, true)
			}
			cur = l.End()
			continue
		}
		// The pads and gap after a leaf, up to the next one, are less
		// than packSlack bytes.
		if l.End()-cur > MaxChunk-packSlack && l.Start > cur {
			add(Span{Start: cur, Len: l.Start - cur}, false)
			cur = l.Start
		}
	}
	if total > cur {
		add(Span{Start: cur, Len: total - cur}, false)
	}
	return dst, inPlace
}

// packSlack bounds the bytes of a run of packed leaves past its last
// leaf: a pad (under 8 bytes) and a gap before a complex128 leaf (under 16).
const packSlack = 64

// HasRuns reports whether a payload of these leaves gains from FlagRuns:
// whether one of them is RunMin bytes or more.
func HasRuns(leaves []Span) bool {
	for _, l := range leaves {
		if l.Len >= RunMin {
			return true
		}
	}
	return false
}

// maxRuns bounds the number of runs of a storage of total bytes in leaves
// leaves: each leaf, and each range before, between and after them, can
// make a run, and the pieces of at most MaxChunk bytes add one per
// MaxChunk bytes.
func maxRuns(leaves, total int64) int64 {
	return 2*leaves + 1 + total/MaxChunk + 1
}
