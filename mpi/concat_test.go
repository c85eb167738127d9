// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSendConcat sends two byte blocks as one message from each even rank
// to the next odd rank, which receives their concatenation, for blocks
// of sizes around Open MPI's eager limit and beyond, empty ones, and
// blocks that are adjacent in memory; then the same with SendConcatUntil.
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
			sendToOddWith(t, c, want, 23, func(dest int) error { return sendConcat(c, tc.a, tc.b, dest, 23) })
			sendToOddWith(t, c, want, 24, func(dest int) error {
				ended, err := sendConcatUntil(c, tc.a, tc.b, dest, 24, make(chan struct{}))
				assert.False(t, ended, "SendConcatUntil ended before done closed")
				return err
			})
		})
	}
}

// TestSendConcatArgs checks that sendConcat validates its arguments as
// Send does.
func TestSendConcatArgs(t *testing.T) {
	c := testComm(t)
	a, b := []byte{1}, []byte{2}
	assert.ErrorIs(t, sendConcat(c, a, b, c.Size(), 0), ErrRank)
	assert.ErrorIs(t, sendConcat(c, a, b, 0, -1), ErrTag)
	assert.NoError(t, sendConcat(c, a, b, ProcNull, 0))
}

// TestMrecvConcat sends a message from each even rank to the next odd
// rank, which receives it into two buffers split at every interesting
// point: around Open MPI's eager limit, past the single-copy threshold, at
// the ends (an empty block), and into the halves of one buffer.
func TestMrecvConcat(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	const tag = 29
	r, s := c.Rank(), c.Size()
	whole := fill[byte](1<<20+13, func(i int) int64 { return int64(i*17 + i/253) })
	for _, tc := range []struct {
		name     string
		n, split int
	}{
		{"small", 100, 64},
		{"header and 4 KiB", 64 + 4096, 64},
		{"header and 16 KiB", 104 + 16<<10, 104},
		{"header and 64 KiB", 64 + 64<<10, 64},
		{"1 MiB", len(whole), 4000},
		{"empty first", 5000, 0},
		{"empty second", 5000, 5000},
		{"both empty", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := whole[:tc.n]
			switch {
			case r%2 == 0 && r+1 < s:
				assert.NoError(t, Send(c, msg, r+1, tag))
			case r%2 == 1:
				m, st, err := Mprobe(c, r-1, tag)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int64(tc.n), st.Bytes())
				// a and b are far apart, and guarded: nothing is written
				// past either.
				buf := make([]byte, tc.n+4096+2)
				for i := range buf {
					buf[i] = 0xee
				}
				a, b := buf[1:1+tc.split], buf[4096+1+tc.split:4096+1+tc.n]
				st, err = mrecvConcat(m, a, b)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, r-1, st.Source)
				assert.Equal(t, tag, st.Tag)
				assert.Equal(t, int64(tc.n), st.Bytes())
				assert.Equal(t, msg[:tc.split], a)
				assert.Equal(t, msg[tc.split:], b)
				assert.Equal(t, byte(0xee), buf[0])
				assert.Equal(t, byte(0xee), buf[len(buf)-1])
				assert.Equal(t, byte(0xee), buf[1+tc.split], "the byte after a")
			}
		})
	}
}

// TestMrecvConcatSize checks that mrecvConcat refuses a message that does
// not exactly fill its two buffers, and leaves it matched for Mrecv.
func TestMrecvConcatSize(t *testing.T) {
	needRanks(t, 2)
	c := testComm(t)
	const tag = 31
	r, s := c.Rank(), c.Size()
	msg := fill[byte](6000, func(i int) int64 { return int64(i) })
	switch {
	case r%2 == 0 && r+1 < s:
		assert.NoError(t, Send(c, msg, r+1, tag))
	case r%2 == 1:
		m, _, err := Mprobe(c, r-1, tag)
		if !assert.NoError(t, err) {
			return
		}
		a, b := make([]byte, 64), make([]byte, 6000)
		_, err = mrecvConcat(m, a, b)
		assert.ErrorIs(t, err, ErrCount, "buffers longer than the message")
		_, err = mrecvConcat(m, a, b[:5000])
		assert.ErrorIs(t, err, ErrTruncate, "buffers shorter than the message")
		_, err = mrecvConcat(m, a[:0], b[:5000])
		assert.ErrorIs(t, err, ErrTruncate, "shorter, one empty")
		got := make([]byte, 6000)
		_, err = Mrecv(m, got)
		assert.NoError(t, err)
		assert.Equal(t, msg, got)
		_, err = mrecvConcat(m, a, b)
		assert.Error(t, err, "a message received already")
	}
}
