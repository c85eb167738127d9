// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package torchwire is the wire format of Python tensordict's init_remote
// and from_remote_init over torch.distributed's "mpi" backend
// (ProcessGroupMPI), as data: the messages, the metadata pickle, and the
// neutral description of a TensorDict that the pickle carries. Package
// tensordict speaks it with WithTorch; this package makes no MPI call.
//
// # Messages
//
// A transfer is three messages on MPI_COMM_WORLD between world ranks
// (Messages):
//
//	0  MPI_LONG x 1            the pickle's length L (torch's object-size tensor)
//	1  MPI_UNSIGNED_CHAR x L   the pickled metadata dict
//	2  MPI_UNSIGNED_CHAR x N   the consolidated storage, N = "_total_bytes"
//
// Point to point (init_remote(dst) / from_remote_init(src)), each is an
// MPI_Isend completed by MPI_Wait before the next, on tag 0 (Tag); the
// receiver posts each receive with the exact count, so a sender must send
// exactly what it announces (more aborts the Python job on
// MPI_ERR_TRUNCATE, less leaves Python with uninitialised bytes). In
// broadcast mode (use_broadcast=True) they are three MPI_Bcast from the
// sender's world rank that every rank of the world makes; a receiver
// learns N only by decoding message 1. Counts are C ints in torch's
// backend, so nothing of 2^31 bytes or more can travel (CheckCounts).
//
// # The pickle
//
// Decode is a restricted unpickler: builtins only (dict, list, tuple, str,
// int, float, bool, None, through the opcodes Python's protocol 2-5 pickler
// writes for them), every global-naming or object-building opcode refused
// with an *OpcodeError naming it, every length checked before anything is
// allocated, depth and size bounded (Limits). Dicts keep their order,
// which carries the TensorDict's key order. Encode writes protocol 4 with
// the same opcodes and no memo.
//
// It is written here rather than taken from github.com/kisielk/og-rek,
// which decodes dicts into Go maps and encodes maps in Go's random map
// order: tensordict's receiver inserts leaves and nested TensorDicts in
// dict order, so order must survive both ways. og-rek serves the tests as
// an independent decoder that both directions are checked against.
//
// # The metadata
//
// FromValue reads the decoded dict into a Meta: the tree of Nodes (cls,
// non-tensors, leaves as dtype, shape and byte range [start, stop) with
// pad, batch size, names, device, is_locked, nested nodes) and the root's
// "_total_bytes", "_storage_device" (broadcast) and "_tensorclass_type".
// Every field is checked, and errors wrap ErrMetadata and name the key.
// Meta.Marshal writes it back as Python's from_remote_init expects it,
// refusing what Python would reject (a complex128 leaf not 16-byte
// aligned, a nested TensorDict named like a metadata field).
//
// The recorded transcripts of testdata/torch-wire (read by package
// wirefixture) are what Python tensordict 0.14 sent, byte for byte; the
// tests replay each of them through both directions.
package torchwire
