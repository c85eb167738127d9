// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/torchwire"
)

// pk returns PROTO 4, body, STOP.
func pk(body ...byte) []byte { return append(append([]byte{0x80, 4}, body...), '.') }

func TestDecodeRefuses(t *testing.T) {
	deep := bytes.Repeat([]byte{']'}, 50)
	deep = append(deep, bytes.Repeat([]byte{'a'}, 49)...)
	tests := []struct {
		name string
		p    []byte
		is   error
		msg  string
	}{
		{"GLOBAL", pk('c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n'), torchwire.ErrOpcode, "GLOBAL (0x63) at byte 2"},
		{"STACK_GLOBAL", pk(0x8c, 1, 'o', 0x8c, 1, 's', 0x93), torchwire.ErrOpcode, "STACK_GLOBAL"},
		{"REDUCE", pk('N', ')', 'R'), torchwire.ErrOpcode, "REDUCE"},
		{"BUILD", pk('}', '}', 'b'), torchwire.ErrOpcode, "BUILD"},
		{"INST", pk('(', 'i', 'a', '\n', 'b', '\n'), torchwire.ErrOpcode, "INST"},
		{"OBJ", pk('(', 'N', 'o'), torchwire.ErrOpcode, "OBJ"},
		{"NEWOBJ", pk('N', ')', 0x81), torchwire.ErrOpcode, "NEWOBJ"},
		{"PERSID", pk('P', '1', '\n'), torchwire.ErrOpcode, "PERSID"},
		{"EXT1", pk(0x82, 1), torchwire.ErrOpcode, "EXT1"},
		{"BINBYTES", pk('C', 1, 'x'), torchwire.ErrOpcode, "SHORT_BINBYTES"},
		{"unknown", pk(0xff), torchwire.ErrOpcode, "unknown opcode"},
		{"no PROTO", []byte{'N', '.'}, torchwire.ErrPickle, "no PROTO"},
		{"PROTO 6", []byte{0x80, 6, 'N', '.'}, torchwire.ErrPickle, "PROTO 6"},
		{"truncated string", pk(0x8c, 200, 'a'), torchwire.ErrPickle, "of 200 bytes"},
		{"huge BINUNICODE", pk('X', 0xff, 0xff, 0xff, 0x7f), torchwire.ErrPickle, "2147483647 bytes"},
		{"huge BINUNICODE8", pk(0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), torchwire.ErrPickle, "bytes"},
		{"huge FRAME", pk(0x95, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 'N'), torchwire.ErrPickle, "FRAME"},
		{"no STOP", []byte{0x80, 4, 'N'}, torchwire.ErrPickle, "no STOP"},
		{"bytes after STOP", append(pk('N'), 'N'), torchwire.ErrPickle, "after STOP"},
		{"two values", pk('N', 'N'), torchwire.ErrPickle, "2 values"},
		{"open MARK", pk('(', 'N'), torchwire.ErrPickle, "MARK"},
		{"empty stack", pk('a'), torchwire.ErrPickle, "empty stack"},
		{"memo never stored", pk('h', 3), torchwire.ErrPickle, "memo index 3"},
		{"invalid UTF-8", pk(0x8c, 1, 0xff), torchwire.ErrPickle, "UTF-8"},
		{"int key", pk('}', 'K', 1, 'N', 's'), torchwire.ErrPickle, "only str keys"},
		{"SETITEM on a list", pk(']', 0x8c, 1, 'k', 'N', 's'), torchwire.ErrPickle, "want a dict"},
		{"LONG1 of 9 bytes", pk(0x8a, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9), torchwire.ErrPickle, "does not fit"},
		// d = {}; d["k"] = d would be a cycle.
		{"self", pk('}', 0x94, 0x8c, 1, 'k', 'h', 0, 's'), torchwire.ErrPickle, "into itself"},
		// l = []; m = [l]; l.append(m) would be a cycle: l is sealed.
		{"cycle", pk(']', 0x94, ']', 'h', 0, 'a', 0x94, 'h', 0, 'h', 1, 'a', 'a'), torchwire.ErrPickle, "already inside"},
		{"deep", pk(deep...), torchwire.ErrLimit, "nested deeper than 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := torchwire.Decode(tt.p, torchwire.Limits{MaxDepth: 20})
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.is), "%v", err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestDecodeLimits(t *testing.T) {
	_, err := torchwire.Decode(pk('N'), torchwire.Limits{MaxPickle: 3})
	assert.ErrorIs(t, err, torchwire.ErrLimit)
	// [x, x] nested: a small pickle of a tree with 2^n nodes.
	var body []byte
	body = append(body, ']') // memo 0 = []
	body = append(body, 0x94)
	for i := range 40 {
		// new = [memo[i], memo[i]]
		body = append(body, ']', '(', 'h', byte(i), 'h', byte(i), 'e', 0x94)
	}
	_, err = torchwire.Decode(pk(body...), torchwire.Limits{MaxNodes: 1 << 20})
	require.Error(t, err)
	assert.ErrorIs(t, err, torchwire.ErrLimit)
	assert.Contains(t, err.Error(), "values")
}

func TestDecodeValues(t *testing.T) {
	v, err := torchwire.Decode(pk(
		'(', 'J', 0xf9, 0xff, 0xff, 0xff, 'M', 0x98, 0x02, 0x8a, 6, 0, 0, 0, 0, 0, 1, 0x8a, 1, 0xff,
		'G', 0x40, 0x04, 0, 0, 0, 0, 0, 0, 0x88, 0x89, 'N', ')', 0x85, 't'), torchwire.Limits{})
	require.NoError(t, err)
	plain, err := torchwire.Plain(v)
	require.NoError(t, err)
	assert.Equal(t, []any{int64(-7), int64(664), int64(1) << 40, int64(-1), 2.5, true, false, nil, []any{[]any{}}}, plain)
}

func TestEncodeRoundTrip(t *testing.T) {
	d := torchwire.NewDict(3)
	d.Set("z", []any{int64(1), -70000, int64(1) << 50, -1.5, "é", strings.Repeat("x", 300)})
	d.Set("a", torchwire.NewTuple(nil, true, []int{}))
	d.Set("m", map[string]any{"b": int64(2), "a": false})
	p, err := torchwire.Encode(d)
	require.NoError(t, err)
	assert.Equal(t, oracle(t, p), mustPlain(t, p))
	v, err := torchwire.Decode(p, torchwire.Limits{})
	require.NoError(t, err)
	got := v.(*torchwire.Dict)
	assert.Equal(t, []string{"z", "a", "m"}, []string{got.Key(0), got.Key(1), got.Key(2)})

	_, err = torchwire.Encode(struct{}{})
	assert.ErrorContains(t, err, "no builtin pickle form")
	_, err = torchwire.Encode("\xff")
	assert.ErrorContains(t, err, "UTF-8")
}

func mustPlain(t *testing.T, p []byte) any {
	t.Helper()
	v, err := torchwire.Decode(p, torchwire.Limits{})
	require.NoError(t, err)
	plain, err := torchwire.Plain(v)
	require.NoError(t, err)
	return plain
}
