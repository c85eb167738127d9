// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// InitRemote and FromRemoteInit with WithBroadcast are a broadcast (see
// TensorDict.broadcast) whose root is the caller of InitRemote: its
// result is dropped there, and the receivers build theirs with their
// own options (WithMaxBytes, WithMemmap, WithAllocator).

// broadcastMode reports whether opts make InitRemote and FromRemoteInit
// a broadcast of tdmpi's (WithBroadcast without WithTorch, whose
// broadcast is torch's).
func broadcastMode(opts []RemoteOption) bool {
	bcast := false
	for _, p := range opts {
		if v, ok := p.(option); ok {
			switch v.kind {
			case optTorch:
				return false
			case optBroadcast:
				bcast = true
			}
		}
	}
	return bcast
}

// initBroadcast is InitRemote with WithBroadcast: a broadcast from the
// caller's rank.
func (td *TensorDict) initBroadcast(opts []RemoteOption) error {
	o := resolve(opts, usesInitSend)
	root := -1 // no group: the options' check refuses the call
	if o.group != nil {
		root = o.group.Rank()
	}
	var out *TensorDict
	return runCollective("InitRemote", root, td.bcastBytes(root), o, td.broadcast(root, &out, bcastExtra{}))
}

// fromBroadcast is FromRemoteInit with WithBroadcast: a broadcast from
// src.
func fromBroadcast(src int, opts []RemoteOption) (*TensorDict, error) {
	o := resolve(opts, usesInitRecv)
	var x bcastExtra
	switch {
	case src == AnySource:
		x.refused = errors.New("AnySource is point to point: a broadcast (WithBroadcast) names its root")
	case o.group != nil && src == o.group.Rank():
		x.refused = errors.New("the root of a broadcast calls InitRemote, not FromRemoteInit")
	}
	if o.memmap != "" || o.alloc != nil {
		x.storage = (&link{o: o}).storageFor
	}
	var td *TensorDict
	err := runCollective("FromRemoteInit", src, nil, o, (*TensorDict)(nil).broadcast(src, &td, x))
	mem.Received() // see there: after this one, what the caller drops can come back
	if err != nil {
		return nil, err
	}
	return td.receivedFrom(src), nil
}
