// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !cgo || nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNoMPI checks the build without MPI (-tags nompi, or without cgo):
// every entry point says MPI is unavailable, with one error.
func TestNoMPI(t *testing.T) {
	assert.Equal(t, FamilyNone, Library())
	assert.Empty(t, LibraryVersion())
	assert.False(t, Initialized())
	assert.False(t, Finalized())
	assert.NoError(t, Busy())
	assert.Zero(t, inFlightOps())
	_, err := InitThread(ThreadMultiple)
	w := World()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"Init", Init()},
		{"InitThread", err},
		{"Finalize", Finalize()},
		{"Send", Send(w, []int{1}, 0, 0)},
		{"sendCopy", func() error { _, err := sendCopy(w, []byte{1}, 0, 0); return err }()},
		{"sendUntil", func() error { _, err := sendUntil(w, []byte{1}, 0, 0, nil); return err }()},
		{"mrecvUntil", func() error { _, _, err := mrecvUntil(&Message{}, []byte{1}, nil); return err }()},
		{"Recv", func() error { _, err := Recv(w, []int{1}, 0, 0); return err }()},
		{"Isend", func() error { _, err := Isend(w, []int{1}, 0, 0); return err }()},
		{"Bcast", Bcast(w, []byte{1}, 0)},
		{"ibcastWait", ibcastWait(w, []byte{1}, 0)},
		{"AllreduceInPlace", AllreduceInPlace(w, []float64{1}, OpSum)},
		{"iallreduceInPlaceWait", iallreduceInPlaceWait(w, []int{1}, OpSum)},
		{"Iallreduce", func() error { _, err := Iallreduce(w, []int{1}, []int{1}, OpSum); return err }()},
		{"Dup", func() error { _, err := w.Dup(); return err }()},
		{"Barrier", w.Barrier()},
		{"Wait", func() error { _, err := (&Request{}).Wait(); return err }()},
		{"WaitAll", WaitAll()},
	} {
		assert.ErrorIs(t, tc.err, ErrNoMPI, tc.name)
	}
	assert.EqualError(t, ErrNoMPI, "tdmpi was built without cgo or with -tags nompi: MPI is unavailable")
	assert.Panics(t, func() { w.Rank() })
	assert.Equal(t, "MPI_THREAD_MULTIPLE", ThreadMultiple.String())
	assert.Equal(t, "MPI_SUM", OpSum.String())
}
