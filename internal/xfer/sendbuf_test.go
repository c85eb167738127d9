// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSendBuf(t *testing.T) {
	for _, n := range []int{0, 1, 8, 9, 1000, 4096, 4097, 64<<10 + 40, 1 << 20, 1<<20 + 1} {
		b := SendBuf(n)
		require.Len(t, b, n)
		assert.True(t, Aligned8(b), "SendBuf(%d) is not 8-byte aligned", n)
		for i := range b {
			b[i] = byte(i) // all of it is writable
		}
		PutSendBuf(b)
	}
}

func TestSendBufReused(t *testing.T) {
	b := SendBuf(3000)
	PutSendBuf(b)
	// A pool may drop what it holds at any collection; within a short loop
	// nearly every buffer comes back.
	allocs := testing.AllocsPerRun(100, func() {
		b := SendBuf(3000)
		b[0] = 1
		PutSendBuf(b)
	})
	assert.Less(t, allocs, 0.5)
}

func TestPutSendBufIgnoresForeign(t *testing.T) {
	PutSendBuf(nil)
	PutSendBuf(make([]byte, 3)) // too small to be a pool's
	PutSendBuf(make([]byte, 3000))
	PutSendBuf(make([]byte, 8<<20)) // larger than the pools keep
	b := SendBuf(3000)
	assert.Len(t, b, 3000)
}
