// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMsgBuf(t *testing.T) {
	for _, n := range []int{0, 1, 8, 9, 1000, 4096, 4097, 64<<10 + 40, 1 << 20, 1<<20 + 1} {
		b := MsgBuf(n)
		require.Len(t, b, n)
		assert.True(t, Aligned8(b), "MsgBuf(%d) is not 8-byte aligned", n)
		for i := range b {
			b[i] = byte(i) // all of it is writable
		}
		PutMsgBuf(b)
	}
}

func TestMsgBufReused(t *testing.T) {
	b := MsgBuf(3000)
	PutMsgBuf(b)
	// A pool may drop what it holds at any collection; within a short loop
	// nearly every buffer comes back.
	allocs := testing.AllocsPerRun(100, func() {
		b := MsgBuf(3000)
		b[0] = 1
		PutMsgBuf(b)
	})
	assert.Less(t, allocs, 0.5)
}

func TestPutMsgBufIgnoresForeign(t *testing.T) {
	PutMsgBuf(nil)
	PutMsgBuf(make([]byte, 3)) // too small to be a pool's
	PutMsgBuf(make([]byte, 3000))
	PutMsgBuf(make([]byte, 8<<20)) // larger than the pools keep
	b := MsgBuf(3000)
	assert.Len(t, b, 3000)
}
