// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package rawbytes gives tdmpi's transfer code the bytes of a
// tensor.Storage without marking them as seen outside tdmpi.
//
// A receive-pool storage (Reusable) whose bytes nothing
// outside tdmpi ever obtained goes back to the pool as soon as it is
// released, instead of when the collector finds it unreachable: nothing
// can still hold a slice of it. Storage.Bytes, and every accessor built on
// it (Tensor.Bytes, Data, Dense), marks the storage as seen. The receives
// that fill such a storage, and the sends that read it, use Of instead:
// they hold the slice only until they return, and every transfer holds
// the storages MPI reads or writes (Hold), so that a release meanwhile
// leaves their memory to MPI until the transfer ends.
package rawbytes
