// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package log is tdmpi's process logger: one zerolog logger per process that
// puts the MPI rank, the world size and the host name on every line.
//
// It is quiet by default. The environment variable TDMPI_LOG sets the level:
// "debug", "info", "warn" or "error" ("trace" and "off" are accepted too);
// an unset or empty TDMPI_LOG disables logging, and an unknown value means
// "error". Lines go to standard error as JSON, or in zerolog's console form
// when TDMPI_LOG_FORMAT is "console".
//
// Before MPI starts, rank and size are those the launcher gives (-1 when
// unknown); package group calls SetRankSize once MPI knows them.
//
//	log.Logger().Debug().Int("bytes", n).Msg("send")
//
// # Files
//
//	log.go  Logger, SetRankSize, SetLevel, Level, SetOutput, SetBase,
//	        ParseLevel: the process logger and TDMPI_LOG
package log
