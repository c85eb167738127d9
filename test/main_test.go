// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"os"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/internal/mpitest"
)

// helperEnv names the helper program a child process runs instead of the
// tests: the test binary re-executes itself (alone, or under its own
// mpirun) with helperEnv set, and init dispatches before TestMain starts
// MPI. See helper_test.go.
const helperEnv = "TDMPI_TEST_HELPER"

func init() {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
}

// hangLimit bounds each operation a test expects to end (contexts of
// receives, inTime, "took" checks). It is there to catch a hang, not to
// measure speed: the CI machine runs 4 ranks on 2 cores beside other jobs,
// where an operation of a few milliseconds can take seconds. It stays
// below mpitest.AgreeTimeout (60 s), which the ranks that sit a subtest
// out spend waiting for the others' verdict.
const hangLimit = 30 * time.Second

func TestMain(m *testing.M) { mpitest.Main(m) }
