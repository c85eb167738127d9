// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package coll runs the collectives of package tensordict (Broadcast,
// AllReduce, Reduce, AllGather, Scatter, GatherAndStack and their
// asynchronous forms) on byte spans, dtypes and shapes: the runner of a
// call and its closing step, the agreements that make every rank return
// the same error, the reduce kernels and the order of a reduction's steps,
// the block layout of the gathers, and the explanation of a structure
// mismatch. Package tensordict walks its TensorDicts and hands their
// leaves and bytes to it.
//
// Each collective is called by every rank of a group, in the same order
// on every rank, as MPI collectives are. Each runs on the group's library
// communicator, holding the group's protocol lock (proto.Collective), so
// collectives of several goroutines on one group never interleave.
//
// None of them hangs on a rank's bad input. Anything one rank finds wrong
// before the payload moves (a leaf that cannot be reduced, a peer's header
// over the limits, a context already done, a different structure) is made
// known to every rank by a small agreement collective, and then every rank
// returns an error. Every step is waited on with the call's context (see
// xfer.Step): a rank whose peers never reach a step returns, and breaks
// the group.
//
// # Files
//
//	call.go       Call, Start, Pending: the runner of a call, its agreements
//	              and its closing step
//	bcast.go      Firsts: how a group's next broadcast starts
//	reduce.go     the reduce kernels and the steps of a reduction
//	fused.go      the steady state of AllReduce and Reduce: one header
//	              exchange in place of the agreement
//	block.go      the block layout of AllGather, Scatter and GatherAndStack
//	structure.go  CheckSame: the structure check, and what a mismatch explains
package coll
