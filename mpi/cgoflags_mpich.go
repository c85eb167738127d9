// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && mpich

package mpi

// MPICH and the MPIs that share its ABI (Intel MPI, Cray MPICH, MVAPICH),
// selected with -tags mpich: Debian's libmpich-dev installs mpich.pc.

// #cgo pkg-config: mpich
import "C"

// family names the MPI family this package was built against.
const family = FamilyMPICH

// ucxEnvAtInit: libmpich links UCX, which reads its configuration when the
// program loads, before Go runs: setting UCX_ERROR_SIGNALS in InitThread
// would be too late (UCX then warns on every rank that it is unused), so
// only the handler restore of InitThread applies.
const ucxEnvAtInit = false
