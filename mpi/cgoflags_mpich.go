// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi && mpich

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

// reduceInPlaceAtRoot: MPICH 4.0.2's MPI_Reduce dereferences MPI_IN_PLACE
// (a segmentation fault at address -1) at root 1 with 2000 float32 at
// np 2 (TestReduceInPlaceRoots); MPI_Ireduce does not.
const reduceInPlaceAtRoot = false
