// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
)

func validHeader() Header {
	return Header{
		Kind: KindInit, Flags: FlagConsolidated, Total: 3 << 30, MetaLen: 420, ClassLen: 12,
		PayloadTag: 4_000_001, Hash: 0xdeadbeefcafef00d, Chunk: MaxChunk, Leaves: 3,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, h := range []Header{
		validHeader(),
		{Kind: KindSend, Flags: FlagInline | FlagConsolidated, Total: 32, MetaLen: 300, Leaves: 3},
		{Kind: KindSend, Flags: FlagPerLeaf | FlagPseudoRandTags, Total: 48, MetaLen: 300, Leaves: 3, PayloadTag: 7},
		{Kind: KindSend, Flags: FlagInline | FlagConsolidated | FlagDescribed, Total: 32, Leaves: 3},
		{Kind: KindSend, Flags: FlagPerLeaf | FlagDescribed, Total: 48, Leaves: 3, PayloadTag: 7},
		{Kind: KindInit, Flags: FlagInline | FlagConsolidated | FlagKeep, Total: 32, MetaLen: 300, ClassLen: 5, Leaves: 3, Ref: 1},
		{Kind: KindInit, Flags: FlagInline | FlagConsolidated | FlagDescribed, Total: 32, Leaves: 3, Ref: 1<<64 - 1},
		{Kind: KindInit, Flags: FlagConsolidated | FlagDescribed, Total: 3 << 30, Chunk: MaxChunk, PayloadTag: 9, Leaves: 3, Ref: 17},
		{Kind: KindBroadcast},
		{Kind: KindReduce, Total: 1, Chunk: 1},
	} {
		b := Append(nil, &h)
		require.Len(t, b, Size)
		got, err := Parse(b, Limits{})
		require.NoError(t, err)
		assert.Equal(t, h, got)
	}
}

func TestAppendNoAlloc(t *testing.T) {
	h := validHeader()
	buf := make([]byte, 0, Size)
	n := testing.AllocsPerRun(100, func() {
		buf = Append(buf[:0], &h)
		if _, err := Parse(buf, Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, n)
}

// patch returns a valid encoded header with f applied to its bytes.
func patch(f func(b []byte)) []byte {
	h := validHeader()
	b := Append(nil, &h)
	f(b)
	return b
}

func TestParseRejects(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		name  string
		msg   []byte
		lim   Limits
		field string
		limit bool
	}{
		{name: "empty", msg: nil, field: "length"},
		{name: "short", msg: patch(func(b []byte) {})[:Size-1], field: "length"},
		{name: "magic", msg: patch(func(b []byte) { b[0] = 'X' }), field: "magic"},
		{name: "version", msg: patch(func(b []byte) { b[4] = Version + 1 }), field: "version"},
		{name: "kind zero", msg: patch(func(b []byte) { b[5] = 0 }), field: "kind"},
		{name: "kind unknown", msg: patch(func(b []byte) { b[5] = 200 }), field: "kind"},
		{name: "flags", msg: patch(func(b []byte) { le.PutUint16(b[6:], 0x8000) }), field: "flags"},
		{name: "negative total", msg: patch(func(b []byte) { le.PutUint64(b[8:], 1<<63) }), field: "total"},
		{name: "1 TB total", msg: patch(func(b []byte) { le.PutUint64(b[8:], 1<<40) }), field: "total", limit: true},
		{name: "total over custom limit", msg: patch(func(b []byte) {}), lim: Limits{MaxTotal: 1 << 30}, field: "total", limit: true},
		{name: "negative meta", msg: patch(func(b []byte) { le.PutUint64(b[16:], ^uint64(0)) }), field: "metadata length"},
		{name: "huge meta", msg: patch(func(b []byte) { le.PutUint64(b[16:], 1<<62) }), field: "metadata length", limit: true},
		{name: "class", msg: patch(func(b []byte) { le.PutUint32(b[24:], 1<<31) }), field: "class name length", limit: true},
		{name: "tag", msg: patch(func(b []byte) { le.PutUint32(b[28:], 1<<31) }), field: "payload tag"},
		{name: "chunk negative", msg: patch(func(b []byte) { le.PutUint64(b[40:], 1<<63) }), field: "chunk size"},
		{name: "chunk big", msg: patch(func(b []byte) { le.PutUint64(b[40:], MaxChunk+1) }), field: "chunk size"},
		{name: "chunk zero", msg: patch(func(b []byte) { le.PutUint64(b[40:], 0) }), field: "chunk size"},
		{name: "leaves negative", msg: patch(func(b []byte) { le.PutUint64(b[48:], 1<<63) }), field: "leaves"},
		{name: "leaves per leaf", msg: patch(func(b []byte) { le.PutUint16(b[6:], uint16(FlagPerLeaf)); le.PutUint64(b[48:], 1<<40) }), field: "leaves"},
		{name: "described init with metadata", msg: patch(func(b []byte) { le.PutUint16(b[6:], uint16(FlagConsolidated|FlagDescribed)); b[56] = 1 }), field: "flags"},
		{name: "described broadcast", msg: patch(func(b []byte) {
			b[5] = byte(KindBroadcast)
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagDescribed))
			le.PutUint32(b[24:], 0)
			le.PutUint64(b[16:], 0)
		}), field: "flags"},
		{name: "keep send", msg: patch(func(b []byte) {
			b[5] = byte(KindSend)
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagKeep))
			b[56] = 1
		}), field: "flags"},
		{name: "keep described", msg: patch(func(b []byte) {
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagKeep|FlagDescribed))
			le.PutUint32(b[24:], 0)
			le.PutUint64(b[16:], 0)
			b[56] = 1
		}), field: "flags"},
		{name: "keep too much", msg: patch(func(b []byte) {
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagKeep))
			le.PutUint64(b[16:], MaxKeptMeta)
			b[56] = 1
		}), field: "metadata to keep", limit: true},
		{name: "keep without ref", msg: patch(func(b []byte) { le.PutUint16(b[6:], uint16(FlagConsolidated|FlagKeep)) }), field: "ref"},
		{name: "described init without ref", msg: patch(func(b []byte) {
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagDescribed))
			le.PutUint32(b[24:], 0)
			le.PutUint64(b[16:], 0)
		}), field: "ref"},
		{name: "ref without keep", msg: patch(func(b []byte) { b[63] = 1 }), field: "ref"},
		{name: "described with metadata", msg: patch(func(b []byte) {
			b[5] = byte(KindSend)
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagDescribed))
			le.PutUint32(b[24:], 0)
		}), field: "flags"},
		{name: "described with class", msg: patch(func(b []byte) {
			b[5] = byte(KindSend)
			le.PutUint16(b[6:], uint16(FlagConsolidated|FlagDescribed))
			le.PutUint64(b[16:], 0)
		}), field: "flags"},
		{name: "inline too big", msg: patch(func(b []byte) { le.PutUint16(b[6:], uint16(FlagInline)) }), field: "inline storage", limit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.msg, tc.lim)
			require.Error(t, err)
			if tc.limit {
				var le *LimitError
				require.ErrorAs(t, err, &le)
				assert.Equal(t, tc.field, le.Field)
				assert.ErrorIs(t, err, ErrLimit)
				assert.Contains(t, err.Error(), "exceeds the limit")
			} else {
				var he *HeaderError
				require.ErrorAs(t, err, &he)
				assert.Equal(t, tc.field, he.Field)
				assert.ErrorIs(t, err, ErrHeader)
			}
		})
	}
}

func TestFrame(t *testing.T) {
	h := Header{Kind: KindInit, Hash: 42, Leaves: 1}
	storage := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	msg := AppendFrame(nil, &h, "pkg.Point", []byte(`{"cls":"TensorDict"}`), storage)
	f, err := ParseFrame(msg, Limits{})
	require.NoError(t, err)
	assert.Equal(t, "pkg.Point", string(f.Class))
	assert.JSONEq(t, `{"cls":"TensorDict"}`, string(f.Meta))
	assert.Equal(t, storage, f.Inline)
	assert.Equal(t, int64(8), f.Total)
	assert.True(t, f.Flags&FlagInline != 0)
	assert.Zero(t, f.Chunks())

	_, err = ParseFrame(msg[:len(msg)-1], Limits{})
	assert.ErrorIs(t, err, ErrHeader)
	_, err = ParseFrame(append(msg, 0), Limits{})
	assert.ErrorIs(t, err, ErrHeader)

	h = Header{Kind: KindInit, Chunk: MaxChunk}
	msg = AppendFrame(nil, &h, "", []byte("{}"), nil)
	f, err = ParseFrame(msg, Limits{})
	require.NoError(t, err)
	assert.Nil(t, f.Inline)
	assert.Empty(t, f.Class)
}

func TestParseSplitFrame(t *testing.T) {
	h := Header{Kind: KindInit, Hash: 42, Leaves: 1}
	storage := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	msg := AppendFrame(nil, &h, "pkg.Point", []byte(`{"cls":"TensorDict"}`), storage)
	at := len(msg) - len(storage)
	f, ok := ParseSplitFrame(msg[:at:at], bytes.Clone(msg[at:]), Limits{})
	require.True(t, ok)
	whole, err := ParseFrame(msg, Limits{})
	require.NoError(t, err)
	assert.Equal(t, whole, f)

	noInline := Header{Kind: KindInit, Chunk: MaxChunk, Total: 16}
	apart := AppendFrame(nil, &noInline, "", []byte("{}"), nil)
	for _, tc := range []struct {
		name       string
		head, tail []byte
		lim        Limits
	}{
		{"split inside the storage", msg[:at+1], msg[at+1:], Limits{}},
		{"split inside the metadata", msg[:at-1], msg[at-1:], Limits{}},
		{"a byte missing", msg[:at], msg[at : len(msg)-1], Limits{}},
		{"a byte more", msg[:at], append(bytes.Clone(msg[at:]), 0), Limits{}},
		{"header cut", msg[:Size-1], msg[Size-1:], Limits{}},
		{"over the limits", msg[:at], msg[at:], Limits{MaxInline: 8}},
		{"no inline storage", apart, make([]byte, 16), Limits{}},
		{"empty", nil, nil, Limits{}},
	} {
		_, ok := ParseSplitFrame(tc.head, tc.tail, tc.lim)
		assert.False(t, ok, tc.name)
	}
}

func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		total, chunk, want int64
	}{
		{0, MaxChunk, 0}, {1, MaxChunk, 1}, {MaxChunk, MaxChunk, 1}, {MaxChunk + 1, MaxChunk, 2}, {3 << 30, MaxChunk, 3}, {10, 3, 4},
	} {
		h := Header{Kind: KindInit, Total: tc.total, Chunk: tc.chunk}
		assert.Equal(t, tc.want, h.Chunks(), "total %d chunk %d", tc.total, tc.chunk)
	}
}

func TestLimitsDefaults(t *testing.T) {
	l := DefaultLimits()
	assert.Equal(t, MachineMaxTotal(), l.MaxTotal)
	assert.LessOrEqual(t, l.MaxTotal, int64(DefaultMaxTotal))
	if p := mem.Physical(); p > 0 {
		assert.LessOrEqual(t, l.MaxTotal, p, "never more than the machine has")
	}
	assert.Equal(t, int64(DefaultMaxMeta), l.MaxMeta)
	l = Limits{MaxMeta: 1 << 40, MaxInline: 1 << 40, MaxClass: 1 << 40}.withDefaults()
	assert.Equal(t, int64(MaxChunk), l.MaxMeta)
	assert.Equal(t, int64(MaxChunk), l.MaxInline)
	assert.Equal(t, 1<<20, l.MaxClass)
}

func TestLimitsMaxFrame(t *testing.T) {
	tests := []struct {
		l         Limits
		inlineMax int64
		want      int64
	}{
		{Limits{MaxMeta: 1000, MaxClass: 10, MaxInline: 500}, 64, Size + 10 + 1000 + 64},
		{Limits{MaxMeta: 1000, MaxClass: 10, MaxInline: 50}, 64, Size + 10 + 1000 + 50},
		{Limits{}, 0, Size + DefaultMaxClass + DefaultMaxMeta},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.l.MaxFrame(tt.inlineMax), "%+v, inline %d", tt.l, tt.inlineMax)
	}
}

func TestPutPanicsOnShortBuffer(t *testing.T) {
	h := validHeader()
	assert.PanicsWithValue(t, "wire: Put: buffer of 3 bytes, need 64", func() { Put(make([]byte, 3), &h) })
	b := make([]byte, Size+5)
	Put(b, &h)
	got, err := Parse(b, Limits{})
	require.NoError(t, err)
	assert.Equal(t, h, got)
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "init", KindInit.String())
	assert.Equal(t, "kind(99)", Kind(99).String())
	assert.False(t, errors.Is(&HeaderError{}, ErrLimit))
}
