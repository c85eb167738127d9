// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi && !mpich

package mpi

// Open MPI, the default family: Debian's libopenmpi-dev installs ompi-c.pc.
// Build with -tags mpich for MPICH (cgoflags_mpich.go).

// #cgo pkg-config: ompi-c
import "C"

// family names the MPI family this package was built against.
const family = FamilyOpenMPI

// ucxEnvAtInit: Open MPI loads its UCX components as plugins in MPI_Init,
// so UCX reads UCX_ERROR_SIGNALS set just before.
const ucxEnvAtInit = true

// reduceInPlaceAtRoot: MPI_Reduce takes MPI_IN_PLACE at any root.
const reduceInPlaceAtRoot = true
