// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/tdmpi/tdmpi/mpi"
)

// Tags on a group's library communicator. Per-leaf messages use the tags
// the caller picks (WithTag, WithPseudoRandTags), below MaxUserTag. Every
// protocol has its own header tag, so a FromRemoteInit never takes the
// header of a Send. Payloads (storages and their chunks) travel on tags
// handed out by a counter per communicator, carried in the header, so that
// concurrent transfers between the same two ranks cannot mix. Package group
// reserves 31744 to 32767.
const (
	// MaxUserTag bounds the per-leaf tags of Send, Recv, ISend and IRecv:
	// they must lie in [0, MaxUserTag). Pseudo-random tags lie in
	// [0, 10000).
	MaxUserTag = 28672

	tagInitHeader  = MaxUserTag + iota // InitRemote/FromRemoteInit headers
	tagSendHeader                      // Send/Recv headers
	tagTestHostile                     // reserved for tests
	tagHeaderEnd   = MaxUserTag + 64

	// Payload tags when MPI_TAG_UB is the portable minimum 32767.
	tagSmallPayloadBase = tagHeaderEnd
	tagSmallPayloadEnd  = 31744
	// Payload tags when MPI_TAG_UB allows more (Open MPI: 2^31-1).
	tagLargePayloadBase = 1 << 15
	tagLargePayloadEnd  = 1 << 30
)

// payloadTags hands out payload tags per library communicator. It holds
// communicators weakly: an entry goes when its communicator is collected.
var payloadTags sync.Map // weak.Pointer[mpi.Comm] -> *tagCounter

type tagCounter struct {
	n          atomic.Uint64
	base, span uint64
}

// nextPayloadTag returns the next payload tag of c, cycling through the
// payload tag range of c.
func nextPayloadTag(c *mpi.Comm) int {
	w := weak.Make(c)
	v, ok := payloadTags.Load(w)
	if !ok {
		tc := &tagCounter{base: tagSmallPayloadBase, span: tagSmallPayloadEnd - tagSmallPayloadBase}
		if ub := c.TagUB(); ub >= tagLargePayloadEnd {
			tc.base, tc.span = tagLargePayloadBase, tagLargePayloadEnd-tagLargePayloadBase
		} else if ub > tagLargePayloadBase+4096 {
			tc.base, tc.span = tagLargePayloadBase, uint64(ub-tagLargePayloadBase)
		}
		var loaded bool
		if v, loaded = payloadTags.LoadOrStore(w, tc); !loaded {
			runtime.AddCleanup(c, func(w weak.Pointer[mpi.Comm]) { payloadTags.Delete(w) }, w)
		}
	}
	tc := v.(*tagCounter)
	return int(tc.base + (tc.n.Add(1)-1)%tc.span)
}
