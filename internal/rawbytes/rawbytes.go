// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package rawbytes

// Of returns the bytes of st, a *tensor.Storage, and false if it was
// released, without marking them as seen. The caller must not keep the
// slice after it returns, nor hand it to anything that does (a
// nonblocking MPI operation that outlives the call, a user). Package
// tensor sets it.
var Of func(st any) ([]byte, bool)

// Pin and Unpin count a transfer that reads st, a *tensor.Storage,
// through Of: a release while it is pinned leaves its memory to the
// collector. A transfer that MPI may still read after its call (given up
// at its context's end) never unpins. Package tensor sets them.
var Pin, Unpin func(st any)

// InitAt makes st, a pointer to a zero tensor.Storage, a storage over b,
// as tensor.StorageOf makes a new one: the storage can then live in the
// same allocation as what refers to it (package tensordict builds a small
// received TensorDict, its storage and the storage's bytes in one). st
// must not be in use: InitAt does not synchronise. Package tensor sets it.
var InitAt func(st any, b []byte)
