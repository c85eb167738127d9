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
