// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSendConcat sends two byte blocks as one message from each even rank
// to the next odd rank, which receives their concatenation, for blocks
// of sizes around Open MPI's eager limit and beyond, empty ones, and
// blocks that are adjacent in memory.
func TestSendConcat(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	whole := fill[byte](1<<20+7, func(i int) int64 { return int64(i*31 + i/251) })
	for _, tc := range []struct {
		name string
		a, b []byte
	}{
		{"small", whole[:64], whole[100:140]},
		{"header and 4 KiB", whole[:64], whole[4096 : 2*4096]},
		{"header and 16 KiB", whole[:64+40], whole[8192 : 8192+16<<10]},
		{"large first", whole[:300<<10], whole[:3]},
		{"1 MiB second", whole[:5], whole[7:]},
		{"adjacent", whole[:1000], whole[1000:5000]},
		{"swapped", whole[5000:9000], whole[:1000]},
		{"empty first", nil, whole[:5000]},
		{"empty second", whole[:5000], whole[:0]},
		{"both empty", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := append(append([]byte{}, tc.a...), tc.b...)
			sendToOddWith(t, c, want, 23, func(dest int) error { return SendConcat(c, tc.a, tc.b, dest, 23) })
		})
	}
}

// TestSendConcatArgs checks that SendConcat validates its arguments as
// Send does.
func TestSendConcatArgs(t *testing.T) {
	c := testComm(t)
	a, b := []byte{1}, []byte{2}
	assert.ErrorIs(t, SendConcat(c, a, b, c.Size(), 0), ErrRank)
	assert.ErrorIs(t, SendConcat(c, a, b, 0, -1), ErrTag)
	assert.NoError(t, SendConcat(c, a, b, ProcNull, 0))
}
