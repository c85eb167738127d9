// Copyright ©2026 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package finalmark lets a multi-rank test binary say, before it finalizes
// MPI, that every rank passed. A launcher wrapper can then tell a job whose
// tests passed but whose MPI_Finalize hangs (Debian 12's MPICH 4.0.2 with
// UCX 1.13 over TCP; hpc/scripts/mpich-exec.sh) from a job that failed.
//
// It depends on nothing of tdmpi, so that both the mpi package's own tests
// and internal/mpitest, which imports mpi, can use it.
package finalmark

import (
	"fmt"
	"io"
	"os"
)

const (
	// Env is the variable that turns the mark on when set to 1.
	Env = "TDMPI_FINALIZE_MARK"
	// Mark starts the line Print writes. hpc/scripts/mpich-exec.sh looks
	// for it at the start of a line; keep the two the same.
	Mark = "mpitest: finalizing: every rank passed"
)

// Print writes Mark and the rank to w, one line, if Env is 1. Call it on
// every rank once all ranks agree that they passed, just before finalizing.
func Print(w io.Writer, rank, size int) {
	if os.Getenv(Env) == "1" {
		fmt.Fprintf(w, "%s (rank %d of %d)\n", Mark, rank, size)
	}
}
