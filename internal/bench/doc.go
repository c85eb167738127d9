// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package bench holds C baselines for tdmpi's benchmarks: loops written
// entirely in C against Open MPI, run on buffers handed in from Go, so that
// a Go benchmark can report its figures beside C's in the same run.
//
// It uses MPI_COMM_WORLD and expects MPI to be initialised (by package mpi).
// Like package mpi's C, it is built only with cgo and without -tags nompi;
// otherwise the package is empty.
//
// # Files
//
//	pingpong.go  PingPong, PingPongMprobe: the C ping-pong loops
package bench
