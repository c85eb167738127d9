// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "strings"

// Family is an MPI implementation family, chosen when tdmpi is built.
type Family string

// The families this package builds against.
const (
	// FamilyOpenMPI is Open MPI, the default (pkg-config ompi-c).
	FamilyOpenMPI Family = "Open MPI"
	// FamilyMPICH is MPICH and the MPIs of its ABI, with -tags mpich
	// (pkg-config mpich).
	FamilyMPICH Family = "MPICH"
	// FamilyNone is a build without cgo (CGO_ENABLED=0): every MPI entry
	// point returns ErrNoMPI.
	FamilyNone Family = "none"
)

// Library returns the MPI family this package was built against. It needs
// no Init; LibraryVersion tells the exact library at run time.
func Library() Family { return family }

// LibraryName returns the MPI library and its version in a few words, such
// as "Open MPI v4.1.4" or "MPICH 4.0.2", taken from LibraryVersion (which
// for MPICH is many lines), or "" in a build without MPI.
func LibraryName() string {
	v := LibraryVersion()
	if after, ok := strings.CutPrefix(v, "MPICH Version:"); ok {
		line, _, _ := strings.Cut(after, "\n")
		return "MPICH " + strings.TrimSpace(line)
	}
	line, _, _ := strings.Cut(v, "\n")
	name, _, _ := strings.Cut(line, ",")
	return strings.TrimSpace(name)
}
