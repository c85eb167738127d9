// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package proto

// The header tags of a group's library communicator (LibComm): above the
// tags users pick (group.MaxUserTag), HeaderTags tags for the headers of
// the library's protocols, one tag per protocol. Package group lays out
// the rest of the tag space (see group/tags.go).
const (
	// HeaderTag is the first of the HeaderTags tags reserved for the
	// library's protocol headers. It equals group.MaxUserTag.
	HeaderTag  = 28672
	HeaderTags = 64
)
