// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "fmt"

// ThreadLevel is an MPI thread support level: ThreadSingle,
// ThreadFunneled, ThreadSerialized or ThreadMultiple.
type ThreadLevel int

// String returns the MPI name of the level, such as "MPI_THREAD_MULTIPLE".
func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}
