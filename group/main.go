// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/tdmpi/tdmpi/mpi"
)

// Main runs f as the whole MPI program of this rank, as Python's
// `python -m mpi4py program.py` runs one: it starts MPI (Init with opts),
// calls f with the world group and, when f returns nil, finalizes MPI and
// exits with status 0. When f returns an error or panics, on any rank,
// Main prints "rank R of N (host): <error>" to standard error (for a panic,
// its value and the goroutine's stack) and aborts the whole job
// (MPI_Abort on the world), so that no rank waits for this one forever:
// the job ends with a non-zero status, this process with status 1. It does
// the same when Finalize fails. When Init fails, Main prints its error and
// exits with status 1. Main never returns.
//
// A panic on another goroutine than f's is not recovered: it ends the
// process, and the launcher (mpirun, srun) then ends the job.
func Main(f func(g *Group) error, opts ...Option) {
	g, err := Init(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := run(f, g); err != nil {
		abort(g, err)
	}
	if err := Finalize(); err != nil {
		abort(g, err)
	}
	os.Exit(0)
}

// run calls f(g), turning a panic into an error that holds its value and
// the stack.
func run(f func(g *Group) error, g *Group) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n\n%s", p, debug.Stack())
		}
	}()
	return f(g)
}

// abort prints err as this rank's and ends the job.
func abort(g *Group, err error) {
	host, herr := os.Hostname()
	if herr != nil {
		host = "unknown host"
	}
	fmt.Fprintf(os.Stderr, "rank %d of %d (%s): %v\n", g.Rank(), g.Size(), host, err)
	if aerr := mpi.Abort(mpi.World(), 1); aerr != nil {
		fmt.Fprintf(os.Stderr, "rank %d of %d (%s): %v\n", g.Rank(), g.Size(), host, aerr)
	}
	os.Exit(1)
}
