// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mpitest helps write tests that run on several MPI ranks at once,
// under go test -exec "mpirun -np N ...".
//
// A test package starts MPI in TestMain and asks each multi-rank test for
// the ranks it needs:
//
//	func TestMain(m *testing.M) { mpitest.Main(m) }
//
//	func TestPingPong(t *testing.T) {
//		g := mpitest.Need(t, 2) // skips unless the world has 2 ranks
//		ctx := mpitest.Ctx(t, 10*time.Second)
//		...
//	}
//
// Ranks agree on every verdict: when a test fails on one rank, it fails on
// every rank (Agree, registered by Need), and the exit code of the test
// binary is the worst of all ranks' (Main). Agreement waits at most
// AgreeTimeout for the other ranks; a rank that waits longer prints why and
// exits, and mpirun then ends the job, so a rank stuck in a receive cannot
// hang the job until its timeout. A test that may run longer on one rank
// than on the others (rank 0 alone runs a job of its own) says so with
// Expect, on every rank.
//
// Tests that use MPI must not call t.Parallel: every rank runs the tests in
// the same order, which agreement relies on.
//
// # Files
//
//	mpitest.go  Main, Need, Agree, Expect, Run, Ctx, AgreeTimeout: multi-rank tests
//	agree.go    how the ranks agree on a verdict, bounded by a timeout
//	env.go      CleanEnv: an environment for child processes without the
//	            launcher's variables
//	proc.go     ProcStatus: a field of /proc/self/status, for memory tests
package mpitest
