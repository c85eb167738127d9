// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "time"

// DefaultSpinWait is how long a blocking receive or probe polls MPI before
// it starts to yield its core between polls (see SetSpinWait).
const DefaultSpinWait = 20 * time.Microsecond
