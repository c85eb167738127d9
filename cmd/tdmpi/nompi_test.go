// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !cgo || nompi

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWithoutMPI checks a tdmpi built without MPI (without cgo, or with
// -tags nompi): env and bench say that MPI is not built in, and version
// says so too.
func TestWithoutMPI(t *testing.T) {
	for _, cmd := range []string{"env", "bench"} {
		code, _, stderr := runTdmpi(cmd)
		assert.Equal(t, exitFailure, code, cmd)
		assert.Contains(t, stderr, "MPI is not built in: tdmpi was built without cgo", cmd)
	}
	code, stdout, _ := runTdmpi("version")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "mpi      not built in (tdmpi was built without cgo or with -tags nompi)\n")
}
