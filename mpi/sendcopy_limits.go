// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// CopySendMax is the largest message SendCopy sends: under the 4 KiB
// eager limit of Open MPI's shared-memory transport (which counts its own
// headers too), so that a send it starts moves without the receiver's
// answer.
const CopySendMax = 4000
