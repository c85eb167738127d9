// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
)

// The kept-structure tests play both sides in one process: the sender's
// records of a peer (KeepRef, KeptSent) and the receiver's of the same
// rank number (Keep, Describe) are apart, so one Link serves as both.
// Each test takes peer numbers of its own, past any real rank, so that
// the world's records stay its own.

// keptFrame is the frame a sender writes for k: the sections travel
// unless described.
func keptFrame(k Kept, class string, meta []byte, hash uint64, leaves, total int64) wire.Frame {
	h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Hash: hash, Leaves: leaves, Total: total}
	c, m := k.Apply(&h, class, meta)
	h.ClassLen, h.MetaLen = len(c), int64(len(m))
	return wire.Frame{Header: h, Class: []byte(c), Meta: m}
}

// ageKept makes the sender's records of peer look as if the frames that
// kept them were sent d ago.
func ageKept(l *Link, d time.Duration) {
	k := keptInits.Of(l.Group)
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.to[l.Peer]; p != nil {
		for i := range p.recs {
			p.recs[i].sentAt = time.Now().Add(-d)
		}
	}
}

// TestKeepRef follows a sender's choice for one structure to one peer
// through the cases that make it travel in full again.
func TestKeepRef(t *testing.T) {
	w := mpitest.Need(t, 1)
	l := &Link{Op: "InitRemote", Group: w, Peer: 1 << 20, Ctx: context.Background()}
	meta := []byte(`{"leaves":{}}`)
	ref := func(class string) Kept { return l.KeepRef(class, meta, 7, 2, 64) }
	sent := func(k Kept) Kept {
		l.KeptSent(k, nil)
		ageKept(l, 0) // however long the test took
		return k
	}

	first := sent(ref(""))
	require.NotZero(t, first.Ref)
	assert.False(t, first.Described, "first: to keep")
	assert.Equal(t, Kept{Ref: first.Ref, Described: true}, ref(""), "again: described")
	assert.Equal(t, Kept{Ref: first.Ref, Described: true}, l.KeepRef("", append(meta, "   "...), 7, 2, 64), "aligned metadata: the same")

	for i, other := range []struct {
		name          string
		class         string
		meta          string
		hash          uint64
		leaves, total int64
	}{
		{"class name", "Cls", string(meta), 7, 2, 64},
		{"metadata", "", `{"leaves":{"a":1}}`, 7, 2, 64},
		{"hash", "", string(meta), 8, 2, 64},
		{"leaves", "", string(meta), 7, 3, 64},
		{"size", "", string(meta), 7, 2, 72},
	} {
		k := l.KeepRef(other.class, []byte(other.meta), other.hash, other.leaves, other.total)
		assert.Equal(t, Kept{Ref: first.Ref + uint64(i) + 1}, k, "%s: a new structure to keep", other.name)
		assert.Equal(t, Kept{}, l.KeepRef(other.class, []byte(other.meta), other.hash, other.leaves, other.total),
			"%s: its keeping frame not sent yet: with the metadata, not kept", other.name)
		sent(k)
		assert.Equal(t, Kept{Ref: k.Ref, Described: true}, l.KeepRef(other.class, []byte(other.meta), other.hash, other.leaves, other.total), other.name)
	}

	// Five more structures took slots; wire.KeptRefs in all push the first out.
	last := first.Ref + 5
	for i := 0; i < wire.KeptRefs-6; i++ {
		last++
		assert.Equal(t, Kept{Ref: last}, sent(l.KeepRef("", []byte(strings.Repeat("x", i+1)), 0, 0, 0)))
	}
	assert.Equal(t, Kept{Ref: first.Ref, Described: true}, ref(""), "still kept")
	last++
	sent(l.KeepRef("", []byte("pushes"), 0, 0, 0))
	again := ref("")
	assert.Equal(t, Kept{Ref: last + 1}, again, "its slot taken: kept again")

	l.KeptSent(again, context.Canceled)
	retry := ref("")
	assert.Equal(t, Kept{Ref: last + 2}, retry, "its keeping frame failed: kept again, under a new ref")
	sent(retry)
	assert.Equal(t, Kept{Ref: retry.Ref, Described: true}, ref(""))
	ageKept(l, KeptRenew)
	assert.Equal(t, Kept{Ref: retry.Ref + 1}, ref(""), "renewal due: kept again")

	big := make([]byte, wire.MaxKeptMeta+1)
	assert.Equal(t, Kept{}, l.KeepRef("", big, 0, 0, 0), "metadata too long to keep")
}

// TestKeptApply checks the header and sections of each way to travel.
func TestKeptApply(t *testing.T) {
	meta := []byte("{}")
	for _, tc := range []struct {
		k         Kept
		flags     wire.Flags
		withMeta  bool
		wantClass string
	}{
		{Kept{}, 0, true, "C"},
		{Kept{Ref: 3}, wire.FlagKeep, true, "C"},
		{Kept{Ref: 3, Described: true}, wire.FlagDescribed, false, ""},
	} {
		var h wire.Header
		class, m := tc.k.Apply(&h, "C", meta)
		assert.Equal(t, tc.flags, h.Flags)
		assert.Equal(t, tc.k.Ref, h.Ref)
		assert.Equal(t, tc.wantClass, class)
		assert.Equal(t, tc.withMeta, m != nil)
	}
}

// TestDescribe is the receiver's side: a frame to keep is kept, a
// described one gets its sections back after its header is checked.
func TestDescribe(t *testing.T) {
	w := mpitest.Need(t, 1)
	l := &Link{Op: "FromRemoteInit", Group: w, Peer: 1<<20 + 1, Ctx: context.Background()}
	meta := []byte(`{"leaves":{"a":["float32",[2],0,8,0]}}`)
	l.Keep(&wire.Frame{Header: wire.Header{Ref: 5, Hash: 9, Leaves: 1, Total: 8}, Class: []byte("Cls"), Meta: meta})

	f := keptFrame(Kept{Ref: 5, Described: true}, "Cls", meta, 9, 1, 8)
	require.Empty(t, f.Meta)
	require.NoError(t, l.Describe(&f, wire.Limits{}))
	assert.Equal(t, "Cls", string(f.Class))
	assert.Equal(t, meta, f.Meta)

	for _, tc := range []struct {
		name   string
		f      wire.Frame
		lim    wire.Limits
		target error
		text   string
	}{
		{"hash", keptFrame(Kept{Ref: 5, Described: true}, "", nil, 10, 1, 8), wire.Limits{}, wire.ErrHeader, "structure hash"},
		{"leaves", keptFrame(Kept{Ref: 5, Described: true}, "", nil, 9, 2, 8), wire.Limits{}, wire.ErrHeader, "2 leaves"},
		{"size", keptFrame(Kept{Ref: 5, Described: true}, "", nil, 9, 1, 16), wire.Limits{}, wire.ErrHeader, "16 bytes"},
		{"metadata over the limit", keptFrame(Kept{Ref: 5, Described: true}, "", nil, 9, 1, 8), wire.Limits{MaxMeta: 8}, wire.ErrLimit, "kept metadata"},
		{"class over the limit", keptFrame(Kept{Ref: 5, Described: true}, "", nil, 9, 1, 8), wire.Limits{MaxClass: 2}, wire.ErrLimit, "kept class"},
		{"never kept", keptFrame(Kept{Ref: 5 + wire.KeptRefs, Described: true}, "", nil, 9, 1, 8), wire.Limits{}, wire.ErrHeader, "did not keep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := l.Describe(&tc.f, tc.lim)
			require.ErrorIs(t, err, tc.target)
			assert.ErrorContains(t, err, tc.text)
		})
	}

	// A ref not kept yet, whose wait the context ends.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(context.DeadlineExceeded)
	lc := *l
	lc.Ctx = ctx
	f = keptFrame(Kept{Ref: 6, Described: true}, "", nil, 9, 1, 8)
	err := lc.Describe(&f, wire.Limits{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "kept structure 6")
}
