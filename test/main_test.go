// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"os"
	"testing"

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

func TestMain(m *testing.M) { mpitest.Main(m) }
