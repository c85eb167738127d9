// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"

	"github.com/tdmpi/tdmpi/internal/mpitest"
)

// TestMain starts MPI for every test of the package (internal and external
// test files share this one binary) and makes the ranks agree on the exit
// code. Under plain go test the world has one rank and multi-rank tests
// skip; run them with
//
//	go test -count=1 -exec "mpirun -np 2 --oversubscribe --bind-to none" ./tensordict/
func TestMain(m *testing.M) { mpitest.Main(m) }
