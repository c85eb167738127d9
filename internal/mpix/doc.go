// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mpix is what tdmpi's own packages (group, tensordict,
// internal/xfer, tensor's memory release) use of the MPI binding beyond
// package mpi's public API: sends from a copy, messages in two blocks,
// waits that a done channel ends, and the registry of nonblocking
// operations in flight. Programs see none of it in mpi's documentation.
//
// The operations need package mpi's unexported state (the C handles of a
// Comm or Message, the registry of requests), and package mpi cannot
// import this package, which names mpi's types. So package mpi fills a
// table of functions in package internal/mpix/hook at its init, and this
// package takes each out once, typed, when it is initialised (after
// package mpi, which it imports): a call here is one call of a function
// value, which the compiler cannot inline but which costs no allocation.
// A function of mpi whose type differs from the one this package expects
// panics at initialisation, in every program and test, never later.
//
// Package mpi documents how each operation works, under the name of the
// same words in lower case (sendCopy for SendCopy, and so on); these
// comments say what a caller may rely on. Like package mpi, this package
// builds with -tags nompi and without cgo, where every operation returns
// mpi.ErrNoMPI.
//
// # Files
//
//	mpix.go      the operations
//	hook/        the table package mpi fills
package mpix
