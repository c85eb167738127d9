// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/tdmpi/tdmpi/internal/finalmark"
)

var bigFlag = flag.Bool("mpi.big", false, "run the 2.5 GiB message tests (also TDMPI_BIG=1)")

// TestMain initialises MPI, runs the tests, and makes every rank exit with
// the worst code of all ranks, so that ranks agree on the verdict.
func TestMain(m *testing.M) {
	if err := Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: Init:", err)
		os.Exit(2)
	}
	if err := benchSetup(); err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: benchmark setup:", err)
		os.Exit(2)
	}
	code := m.Run()
	if err := benchTeardown(); err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: benchmark teardown:", err)
		code = max(code, 5)
	}
	worst := []int32{int32(code)}
	if err := AllreduceInPlace(World(), worst, OpMax); err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: agreeing on the verdict:", err)
		worst[0] = 3
	}
	if worst[0] == 0 {
		finalmark.Print(os.Stderr, World().Rank(), World().Size())
	}
	if err := Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "mpi test: Finalize:", err)
		worst[0] = max(worst[0], 4)
	}
	os.Exit(int(worst[0]))
}
