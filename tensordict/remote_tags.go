// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import "github.com/tdmpi/tdmpi/group"

// Tags on a group's library communicator (laid out by package group).
// Per-leaf messages use the tags the caller picks (WithTag,
// WithPseudoRandTags), below MaxUserTag. Every protocol has its own header
// tag, so a FromRemoteInit never takes the header of a Send. Payloads
// (storages and their chunks) travel on tags the group hands out
// (group.Group.PayloadTag), carried in the header, so that concurrent
// transfers between the same two ranks cannot mix.
const (
	// MaxUserTag bounds the per-leaf tags of Send, Recv, ISend and IRecv:
	// they must lie in [0, MaxUserTag). Pseudo-random tags lie in
	// [0, 10000).
	MaxUserTag = group.MaxUserTag

	tagInitHeader  = group.HeaderTag + iota // InitRemote/FromRemoteInit headers
	tagSendHeader                           // Send/Recv headers
	tagTestHostile                          // reserved for tests
)
