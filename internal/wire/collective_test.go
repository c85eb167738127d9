// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBcastFrame writes the messages that start broadcasts of frames
// short and long against the first message, and reads them back as a
// receiver does.
func TestBcastFrame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		meta     int
		inline   int // -1: the storage follows apart
		first    int
		wantMore bool
	}{
		{"whole", 100, 64, BcastFirst, false},
		{"empty storage", 100, 0, BcastFirst, false},
		{"storage apart", 100, -1, BcastFirst, true},
		{"frame in parts", 5000, 64, BcastFirst, true},
		{"whole in a longer first", 5000, 64, 8192, false},
		{"exactly the first", BcastFirst - BcastPrefix - Size - 3, 0, BcastFirst, false},
		{"one byte over", BcastFirst - BcastPrefix - Size - 2, 0, BcastFirst, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := bytes.Repeat([]byte("m"), tc.meta)
			var inline []byte
			h := Header{Kind: KindBroadcast, Flags: FlagConsolidated, Leaves: 2}
			if tc.inline >= 0 {
				inline = bytes.Repeat([]byte{7}, tc.inline)
			} else {
				h.Total, h.Chunk = 1<<20, MaxChunk
			}
			frameLen := Size + len("cls") + len(meta) + len(inline)
			n := BcastMessageLen(frameLen, tc.first)
			require.GreaterOrEqual(t, n, tc.first)
			msg := bytes.Repeat([]byte{0xff}, n) // the buffer is not clean
			msg = PutBcastFrame(msg, &h, "cls", meta, inline, tc.inline < 0, tc.first)

			p := ParseBcastHead(msg)
			assert.Equal(t, BcastHead{Status: BcastOK, FrameLen: uint64(frameLen), More: tc.wantMore}, p)
			got, err := Parse(msg[BcastPrefix:], Limits{})
			require.NoError(t, err)
			require.NoError(t, p.Check(&got, 1, tc.first))
			f, err := ParseFrame(msg[BcastPrefix:BcastPrefix+frameLen], Limits{})
			require.NoError(t, err)
			assert.Equal(t, "cls", string(f.Class))
			assert.Equal(t, meta, f.Meta)
			if tc.inline >= 0 {
				assert.Equal(t, inline, f.Inline)
			} else {
				assert.Nil(t, f.Inline)
			}
			assert.Equal(t, make([]byte, n-BcastPrefix-frameLen), msg[BcastPrefix+frameLen:], "zeros after the frame")
		})
	}
}

// TestBcastHeadCheck checks a first message's prefix against headers it
// does not announce.
func TestBcastHeadCheck(t *testing.T) {
	h := Header{Kind: KindBroadcast, Flags: FlagConsolidated | FlagInline, MetaLen: 10, Total: 16}
	frameLen := uint64(Size + h.Body())
	for _, tc := range []struct {
		name string
		h    Header
		p    BcastHead
		want string
	}{
		{"another kind", Header{Kind: KindSend}, BcastHead{FrameLen: Size}, "not a broadcast"},
		{"frame length", h, BcastHead{FrameLen: frameLen + 1}, "its header"},
		{"past the first message", h, BcastHead{FrameLen: BcastFirst}, "in a first message of"},
		{"inline and more", h, BcastHead{FrameLen: frameLen, More: true}, "inline storage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "past the first message" {
				tc.h.MetaLen = BcastFirst - Size - 16
			}
			err := tc.p.Check(&tc.h, 3, BcastFirst)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "rank 3")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	require.NoError(t, BcastHead{FrameLen: frameLen}.Check(&h, 3, BcastFirst))
}

func TestPutBcastStatus(t *testing.T) {
	first := bytes.Repeat([]byte{1}, BcastFirst)
	PutBcastStatus(first, BcastFailed, "out of memory")
	assert.Equal(t, BcastHead{Status: BcastFailed}, ParseBcastHead(first))
	assert.Equal(t, "out of memory", BcastFailure(first))

	long := strings.Repeat("e", 2*MaxReportedError)
	PutBcastStatus(first, BcastFailed, long)
	assert.Equal(t, long[:MaxReportedError], BcastFailure(first), "cut to MaxReportedError")

	PutBcastStatus(first, BcastNotSent, "ignored")
	assert.Equal(t, BcastHead{Status: BcastNotSent}, ParseBcastHead(first))
	assert.Equal(t, make([]byte, BcastFirst), append(make([]byte, 8), first[8:]...), "nothing but the status")
}

func TestNextBcastFirst(t *testing.T) {
	for _, tc := range []struct {
		first    int
		frameLen uint64
		want     int
	}{
		{BcastFirst, 100, BcastFirst},                        // fits
		{BcastFirst, 2*BcastFirst - BcastPrefix, BcastFirst}, // stays in parts
		{BcastFirst, 2 * BcastFirst, 8192},                   // rounded up to 256 bytes
		{8192, 2 * BcastFirst, 8192},                         // fits and fills half
		{8192, 3000, BcastFirst},                             // shrinks back
		{16384, 5000, BcastFirst},                            // fills less than half, fits two first
		{16384, 9000, 16384},                                 // fills half
		{32768, 9000, 9216},                                  // fills less than half: follows the frame
		{BcastFirst, BcastFirstMax - BcastPrefix, BcastFirstMax},
		{BcastFirst, BcastFirstMax - 10, BcastFirst}, // with the prefix, past the bound
		{BcastFirstMax, 1 << 30, BcastFirst},
	} {
		assert.Equal(t, tc.want, NextBcastFirst(tc.first, tc.frameLen), "first %d, frame %d", tc.first, tc.frameLen)
	}
}

// TestReportedError reads the error texts ranks pass each other.
func TestReportedError(t *testing.T) {
	assert.Equal(t, "abc", ReportedError([]byte("abc\x00def")))
	assert.Equal(t, "abc", ReportedError([]byte("abc")))
	assert.Equal(t, "", ReportedError(make([]byte, 8)))
}
