// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// selfLink returns a link from each rank to itself on the world's
// library communicator: what it sends itself, a drain takes.
func selfLink(t *testing.T) *Link {
	w := mpitest.Need(t, 1)
	return &Link{Op: "test", Group: w, Comm: proto.LibComm(w), Peer: w.Rank(), Dir: "from", Ctx: context.Background()}
}

// sendSelf sends l's rank a message of n bytes on each tag, and returns a
// function that waits for the sends.
func sendSelf(t *testing.T, l *Link, n int, tags ...int) func() {
	var reqs []*mpi.Request
	for _, tag := range tags {
		r, err := mpi.Isend(l.Comm, make([]byte, n), l.Peer, tag)
		require.NoError(t, err)
		reqs = append(reqs, r)
	}
	return func() {
		for _, r := range reqs {
			_, err := r.Wait()
			require.NoError(t, err)
		}
	}
}

// assertNoneWaits checks that no message from l's peer waits on any of tags.
func assertNoneWaits(t *testing.T, l *Link, tags ...int) {
	for _, tag := range tags {
		ok, _, err := mpi.Iprobe(l.Comm, l.Peer, tag)
		require.NoError(t, err)
		assert.False(t, ok, "a message waits on tag %d", tag)
	}
}

// TestDrainSend drains refused Send transfers: per-leaf messages on
// pseudo-random tags from the second leaf on, and a consolidated one whose
// metadata message was not received. A message on another tag stays.
func TestDrainSend(t *testing.T) {
	l := selfLink(t)
	const other = 917
	l0 := IntGenerator(40)
	l1 := IntGenerator(l0 + 1)
	l2 := IntGenerator(l1 + 1)
	wait := sendSelf(t, l, 8, l1, l2, other)
	h := wire.Header{Kind: wire.KindSend, Flags: wire.FlagPerLeaf | wire.FlagPseudoRandTags, PayloadTag: 40, Leaves: 3, Total: 24}
	require.NoError(t, l.DrainSend(&h, 30, false, 1))
	wait()
	assertNoneWaits(t, l, l1, l2)

	const tag0 = 31
	wait = sendSelf(t, l, 64, tag0, tag0)
	h = wire.Header{Kind: wire.KindSend, Flags: wire.FlagConsolidated, Total: 64, Chunk: wire.MaxChunk, MetaLen: 10}
	require.NoError(t, l.DrainSend(&h, tag0, true, 0))
	wait()
	assertNoneWaits(t, l, tag0)

	ok, st, err := mpi.Iprobe(l.Comm, l.Peer, other)
	require.NoError(t, err)
	require.True(t, ok, "the message on another tag was taken")
	var m mpi.Message
	_, err = Probe(context.Background(), l.Comm, l.Peer, other, &m)
	require.NoError(t, err)
	require.NoError(t, Discard(&m, st.Bytes(), nil))
}

// TestDrainInit drains a refused InitRemote: the payload its header
// announces, and the structure its frame asks to keep is kept all the
// same; a header that cannot be read drains nothing.
func TestDrainInit(t *testing.T) {
	l := selfLink(t)
	const tag = 32
	wait := sendSelf(t, l, 16, tag)
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated | wire.FlagKeep, Total: 16, Chunk: wire.MaxChunk,
		PayloadTag: tag, Leaves: 1, Hash: 5, Ref: 3 << 40}
	frame := wire.AppendFrame(nil, &h, "", []byte(`{"k":1}`), nil)
	require.NoError(t, l.DrainInit(frame))
	wait()
	assertNoneWaits(t, l, tag)

	described := wire.Frame{Header: wire.Header{Kind: wire.KindInit, Flags: wire.FlagDescribed, Ref: 3 << 40, Hash: 5, Leaves: 1, Total: 16}}
	require.NoError(t, l.Describe(&described, wire.Limits{}), "kept though refused")
	assert.Equal(t, `{"k":1}`, string(described.Meta))

	wait = sendSelf(t, l, 16, tag)
	require.NoError(t, l.DrainInit([]byte("not a header")))
	bad := wire.Header{Kind: wire.KindSend, Total: 16, Chunk: wire.MaxChunk, PayloadTag: tag}
	require.NoError(t, l.DrainInit(wire.Append(nil, &bad)), "not InitRemote's")
	ok, _, err := mpi.Iprobe(l.Comm, l.Peer, tag)
	require.NoError(t, err)
	require.True(t, ok, "drained on an untrusted header")
	require.NoError(t, DrainChunks(l.Comm, l.Peer, tag, 1))
	wait()
}

// TestDrainMessagesIdle: a message announced and never sent ends the
// drain with an error after DrainIdle, not a hang.
func TestDrainMessagesIdle(t *testing.T) {
	l := selfLink(t)
	err := DrainChunks(l.Comm, l.Peer, 33, 1)
	require.Error(t, err)
	assert.ErrorContains(t, err, "did not come within")
}
