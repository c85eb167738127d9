// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import "sync/atomic"

// The tag space of a group's library communicator (LibComm), in one place.
// Below MaxUserTag: the tags library users choose for their per-leaf
// messages (tensordict's WithTag, WithPseudoRandTags). Then HeaderTags
// tags for the headers of the library's protocols, one tag per protocol.
// Then the payload tags PayloadTag hands out, up to createTagBase, and the
// tags New uses to create subgroups (MPI_Comm_create_group). Where MPI
// allows tags beyond 2^15 (Open MPI: 2^31-1; MPI guarantees only 32767),
// payload tags use a larger range above all of these.
const (
	// MaxUserTag bounds the tags users pick for the library's messages:
	// they lie in [0, MaxUserTag).
	MaxUserTag = 28672

	// HeaderTag is the first of the HeaderTags tags reserved for the
	// library's protocol headers.
	HeaderTag  = MaxUserTag
	HeaderTags = 64

	smallPayloadBase = HeaderTag + HeaderTags
	smallPayloadEnd  = createTagBase
	largePayloadBase = 1 << 15
	largePayloadEnd  = 1 << 30
)

// payloadTags is a group's counter of payload tags and its range.
type payloadTags struct {
	n          atomic.Uint64
	base, span uint64
}

// initPayloadTags sets g's payload tag range from its library
// communicator's largest tag.
func (g *Group) initPayloadTags() {
	t := &g.payload
	t.base, t.span = smallPayloadBase, smallPayloadEnd-smallPayloadBase
	if g.lib == nil {
		return
	}
	if ub := g.lib.TagUB(); ub >= largePayloadEnd {
		t.base, t.span = largePayloadBase, largePayloadEnd-largePayloadBase
	} else if ub > largePayloadBase+4096 {
		t.base, t.span = largePayloadBase, uint64(ub-largePayloadBase)
	}
}

// PayloadTag returns the next tag for a payload on LibComm, cycling
// through g's payload range, so that concurrent transfers between the same
// ranks each have a tag of their own (the sender carries it in its
// header). It is safe for concurrent use.
func (g *Group) PayloadTag() int {
	t := &g.payload
	return int(t.base + (t.n.Add(1)-1)%t.span)
}
