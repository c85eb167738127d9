// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// leaveTag is the tag of the notice group.Finalize sends to every other
// rank when it leaves (group's leaveTag).
const leaveTag = proto.HeaderTag + proto.HeaderTags - 1

// TestSendPeerLeft: in a subgroup of ranks 0 and 1 made for each case,
// rank 1 sends rank 0 the notice group.Finalize sends when a rank leaves,
// without leaving, and then does not receive: rank 0 counts it gone about
// a second later. Rank 0's blocking send to it of a message MPI does not
// send eagerly on any transport (Link.Send of 8 MiB, SendJoined of 64 B
// and 8 MiB, FinishSends of an Isend of 8 MiB), under way when rank 1 is found gone, returns an
// error wrapping group.ErrPeerLeft with gone true; a second one returns
// that error without posting anything, and a message MPI sends eagerly is
// still sent. Rank 1 then receives what was given up, whole: package mpi
// completes those sends (InFlight back to 0).
func TestSendPeerLeft(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	big := bytes.Repeat([]byte{7}, 8<<20)
	head, tail := bytes.Repeat([]byte{1}, 64), bytes.Repeat([]byte{2}, 8<<20)
	joined := append(append([]byte{}, head...), tail...)
	name := func(int) string { return "the message" }
	const tag, doneTag = 11, 99
	for _, c := range []struct {
		name string
		want []byte // what rank 1 receives of the send given up
		send func(l *Link) (gone bool, err error)
	}{
		{"Send", big, func(l *Link) (bool, error) { return l.Send(big, tag) }},
		{"SendJoined", joined, func(l *Link) (bool, error) { return l.SendJoined(head, tail, tag, name) }},
		{"FinishSends", big, func(l *Link) (bool, error) {
			r, err := mpi.Isend(l.Comm, big, l.Peer, tag)
			if err != nil {
				return false, err
			}
			n, err := l.FinishSends([]*mpi.Request{r})
			return n > 0, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, err := g.New([]int{0, 1})
			require.NoError(t, err)
			defer func() { assert.NoError(t, sub.Free()) }()
			lib := proto.LibComm(sub)
			if sub.Rank() == 1 {
				require.NoError(t, mpi.Send(lib, []byte(nil), 0, leaveTag))
				_, err := mpi.Recv(lib, []byte{0}, 0, doneTag) // rank 0 has given up
				require.NoError(t, err)
				got := make([]byte, len(c.want))
				_, err = mpi.Recv(lib, got, 0, tag)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(c.want, got), "the send given up arrived whole")
				small := make([]byte, 3)
				_, err = mpi.Recv(lib, small, 0, tag+1)
				require.NoError(t, err)
				assert.Equal(t, []byte{3, 3, 3}, small)
				return
			}
			l := &Link{Op: "test", Group: sub, Comm: lib, Peer: 1, Dir: "to", Ctx: context.Background()}
			gone, err := c.send(l)
			assert.ErrorIs(t, err, group.ErrPeerLeft, "under way as rank 1 left")
			assert.ErrorContains(t, err, fmt.Sprintf("rank 1 of 2 %v", group.ErrPeerLeft))
			assert.True(t, gone, "under way as rank 1 left")
			if c.name != "FinishSends" { // which posts before it waits
				gone, err = c.send(l)
				assert.ErrorIs(t, err, group.ErrPeerLeft, "after rank 1 left")
				assert.False(t, gone, "after rank 1 left: nothing posted")
			}
			gone, err = l.Send([]byte{3, 3, 3}, tag+1)
			assert.NoError(t, err, "a message MPI sends eagerly")
			assert.False(t, gone)
			require.NoError(t, mpi.Send(lib, []byte{1}, 1, doneTag))
			for limit := time.Now().Add(time.Minute); mpix.InFlight() > 0 && time.Now().Before(limit); {
				time.Sleep(time.Millisecond)
			}
			assert.Zero(t, mpix.InFlight(), "the send given up completed once received")
		})
	}
}
