// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"sync/atomic"

	"github.com/tdmpi/tdmpi/internal/proto"
)

// MaxUserTag bounds the tags a program gives the library's messages
// (tensordict's WithTag, WithPseudoRandTags): they lie in [0, MaxUserTag).
// The library's own tags lie above it, on a communicator of their own.
const MaxUserTag = 28672

// The rest of the tag space of a group's library communicator
// (proto.LibComm), in one place. Above the users' tags, proto.HeaderTags
// tags for the headers of the library's protocols, one tag per protocol.
// Then the payload tags proto.PayloadTag hands out, up to createTagBase,
// and the tags New uses to create subgroups (MPI_Comm_create_group).
// Where MPI allows tags beyond 2^15 (Open MPI: 2^31-1; MPI guarantees only
// 32767), payload tags use a larger range above all of these.
const (
	smallPayloadBase = proto.HeaderTag + proto.HeaderTags
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

// The header tags start where the users' tags end (either line fails to
// compile otherwise).
const (
	_ uint = MaxUserTag - proto.HeaderTag
	_ uint = proto.HeaderTag - MaxUserTag
)
