// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mpi is a cgo binding to Open MPI (MPI 3.1): environment,
// communicators, point-to-point messages, matched probes, nonblocking
// requests and collectives, with typed Go slices as buffers.
package mpi
