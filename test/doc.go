// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package test holds tdmpi's system-level tests: what happens to a job when
// a rank dies, when ranks disagree or misuse the API, under a long
// concurrent load, when the disk is full or a mapped file shrinks, and when
// a peer or a directory is hostile. It has no API; README.md lists the
// files, what each checks, and how to run them.
//
// The tests run as one process (go test ./test/) and under mpirun
// (go test -exec "mpirun -np 4 --oversubscribe --bind-to none" ./test/).
// Tests that need several ranks skip at size 1 with the reason; tests that
// start their own MPI jobs (rank kills) run them from rank 0 only.
package test
