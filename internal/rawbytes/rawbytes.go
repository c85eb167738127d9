// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package rawbytes

// Of returns the bytes of st, a *tensor.Storage, and false if it was
// released, without marking them as seen. The caller must not keep the
// slice after it returns, nor hand it to anything that does (a
// nonblocking MPI operation that outlives the call, a user). Package
// tensor sets it.
var Of func(st any) ([]byte, bool)

// Hold counts a transfer for which MPI may read or write the memory of
// st, a *tensor.Storage, and reports whether st is live (false, holding
// nothing, once it is released). While st is held, its Release marks it
// released but leaves its memory as it is: the Unhold that ends the last
// hold frees it (unmaps it, hands it back to the receive pool). A
// transfer holds every storage it hands to MPI from before it takes the
// storage's bytes until MPI no longer uses them: one that gave up
// operations on them (at its context's end) ends its holds only once
// those have completed (mpix.AfterInFlight). Package tensor sets them.
var (
	Hold   func(st any) bool
	Unhold func(st any)
)

// Reusable returns a new *tensor.Storage over b, memory from the receive
// pool (mem.Recv) that no other storage wraps: its Release gives the
// memory back to the pool (see tensor.Storage.Release). Package tensor
// sets it.
var Reusable func(b []byte) any

// InitAt makes st, a pointer to a zero tensor.Storage, a storage over b,
// as tensor.StorageOf makes a new one: the storage can then live in the
// same allocation as what refers to it (package tensordict builds a small
// received TensorDict, its storage and the storage's bytes in one). st
// must not be in use: InitAt does not synchronise. Package tensor sets it.
var InitAt func(st any, b []byte)
