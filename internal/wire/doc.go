// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package wire is the binary header that starts every tdmpi protocol
// message: InitRemote, Send/Recv, broadcast and the collectives.
//
// The header is transport information only. It is kept apart from the
// tensordict metadata (the JSON tree of leaves and non-tensor data), so that
// the schema never carries fields such as the total byte count, as Python
// tensordict's does.
//
// A header is Size bytes, little-endian:
//
//	offset size field
//	     0    4 magic "TDMP"
//	     4    1 format version (Version)
//	     5    1 message kind (Kind)
//	     6    2 flags (Flags)
//	     8    8 total storage bytes (int64)
//	    16    8 metadata length in bytes (int64)
//	    24    4 tensorclass name length in bytes (uint32)
//	    28    4 payload tag (int32)
//	    32    8 structure hash (uint64)
//	    40    8 chunk size of the storage payload, or with FlagRuns the
//	           number of its runs (int64)
//	    48    8 number of tensor leaves (int64)
//	    56    8 ref of a kept InitRemote structure (uint64), else zero
//
// A frame is a header followed by the tensorclass name, the metadata and,
// when FlagInline is set, the storage itself. A frame with FlagDescribed
// has neither class name nor metadata. For Send, the same sender described
// the structure in an earlier transfer on the same tag. For InitRemote,
// the receiver kept the class name and metadata of an earlier frame from
// the same sender, which carried FlagKeep and the same ref.
//
// A storage that does not travel inline follows the frame in payload
// messages on the payload tag: chunks of the storage, each of the chunk
// size but the last, or, with FlagRuns (InitRemote only), its runs (see
// Runs), which the receiver works out from the metadata: the sender then
// reads its large leaves where they lie instead of packing them first.
//
// Everything read from a peer is untrusted: Parse checks every field
// against Limits before a caller allocates anything, so a peer claiming a
// terabyte gets an error, not an out-of-memory crash.
//
// # Files
//
//	header.go  Header, Kind, Flags, Size, Version, MaxChunk: the 64-byte
//	           binary header
//	frame.go   Frame, ParseFrame, AppendFrame: a header with its class,
//	           metadata and inline payload in one message
//	limits.go  Limits, DefaultLimits: the bounds a receiver enforces
//	runs.go    Runs, Span, RunMin: the messages of an InitRemote payload
//	           with FlagRuns, its large leaves read in place
//	collective.go  BcastFirst, BcastHead, PutBcastFrame, NextBcastFirst:
//	           the collectives' fixed messages and a broadcast's first one
//	errors.go  ErrHeader, ErrLimit, HeaderError, LimitError
package wire
