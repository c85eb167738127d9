// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

// Sizes of the collectives' fixed messages. Every rank of an MPI
// collective passes the same count, so these are part of the protocol: a
// peer (or a test crafting one) must use them.
const (
	// BcastFirst is the size of the first message of Broadcast and of
	// broadcast-mode InitRemote. A TensorDict whose header, class name,
	// metadata and storage fit in it travels in that one message; larger
	// ones follow in more messages. It stays under the 4 KiB eager limit
	// of Open MPI's shared-memory transport, which counts its own headers
	// too: a broadcast of 4096 bytes took 4.0-5.1 us here, one of 4000
	// bytes 1.0-1.2 us (4032 still passed, 4064 did not).
	BcastFirst = 4000

	// BcastPrefix is the part of Broadcast's first message before the
	// frame: status (0 ok, 1 the source failed and its error text
	// follows, at most MaxReportedError bytes), frame length, and whether
	// more messages follow, each a little-endian uint64.
	BcastPrefix = 24

	// MaxReportedError bounds the text of a rank's error that the
	// collectives' agreement passes to the other ranks (a broadcast of
	// exactly this many bytes).
	MaxReportedError = 1024
)
