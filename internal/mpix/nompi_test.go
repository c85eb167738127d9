// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !cgo || nompi

package mpix_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/mpi"
)

// TestNoMPI: without MPI, package mpi fills the table all the same (this
// package would panic at initialisation otherwise), and every operation
// says MPI is unavailable.
func TestNoMPI(t *testing.T) {
	w := mpi.World()
	var m mpi.Message
	_, err := mpix.SendCopy(w, []byte{1}, 0, 0)
	assert.ErrorIs(t, err, mpi.ErrNoMPI, "SendCopy")
	assert.ErrorIs(t, mpix.SendConcat(w, []byte{1}, []byte{2}, 0, 0), mpi.ErrNoMPI, "SendConcat")
	_, _, err = mpix.MprobeUntil(&m, w, 0, 0, nil)
	assert.ErrorIs(t, err, mpi.ErrNoMPI, "MprobeUntil")
	_, _, err = mpix.RecvExact(&m, w, []byte{1}, 0, 0)
	assert.ErrorIs(t, err, mpi.ErrNoMPI, "RecvExact")
	_, err = mpix.IbcastUntil(w, []float64{1}, 0, nil)
	assert.ErrorIs(t, err, mpi.ErrNoMPI, "IbcastUntil")
	_, err = mpix.IallreduceInPlaceUntil(w, []int32{1}, mpi.OpSum, nil)
	assert.ErrorIs(t, err, mpi.ErrNoMPI, "IallreduceInPlaceUntil")
	assert.Zero(t, mpix.InFlight())
	ran := false
	mpix.AfterInFlight(func() { ran = true })
	assert.True(t, ran, "AfterInFlight with nothing in flight runs f at once")
}
