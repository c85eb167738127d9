// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Helper programs run in child processes: the test binary re-executed with
// helperEnv set to one of these modes, under its own mpirun or alone. They
// take their parameters from the environment (names below), print what the
// parent checks, and exit with one of the helper exit codes.
const (
	envOp       = "TDMPI_TEST_OP"          // operation of helperLoop
	envBytes    = "TDMPI_TEST_BYTES"       // payload size
	envDir      = "TDMPI_TEST_DIR"         // directory for pid files, markers, data
	envDeadline = "TDMPI_TEST_DEADLINE_MS" // helperLoop: WithContext deadline of each call; unset: none
	envIters    = "TDMPI_TEST_ITERS"       // helperLoop: iterations before a clean exit; unset: until killed
	envSender   = "TDMPI_TEST_SENDER"      // helperLoop: the rank (0 or 1) that sends InitRemote; unset: 0
	envPause    = "TDMPI_TEST_PAUSE_MS"    // helperLoop: the sender's pause before each InitRemote but the first
	envLate     = "TDMPI_TEST_LATE_MS"     // helperLoop: the receiver's pause before each FromRemoteInit
	envCase     = "TDMPI_TEST_CASE"        // helperMisuse: the misuse case (see misuseCases)
)

// Helper modes.
const (
	helperLoop   = "loop"   // MPI: run envOp (envIters times or forever), log each start and end
	helperStall  = "stall"  // MPI: rank 0 stops sending; rank 1 receives with a deadline
	helperMisuse = "misuse" // MPI: ranks misuse a collective with a deadline (crossed_test.go)
	// MPI: rank 0 stalls in the middle of an InitRemote payload; rank 1 receives with a deadline (stallmid_test.go)
	helperStallMid = "stallmid"
)

// Helper exit codes.
const (
	exitOK        = 0
	exitSetup     = 10 // bad parameters or MPI start failed
	exitOpFailed  = 11 // the operation returned an error
	exitDeadline  = 12 // stall: the receive returned its context error, as expected
	exitTooLong   = 13 // the helper ran out of its time without being killed
	exitWrongData = 14 // loop: a call returned without error but with wrong data
	exitNoFinal   = 15 // misuse: group.Finalize refused (an abandoned step), exited without it
)

// helperLifetime bounds every helper, in case its parent is gone.
const helperLifetime = 3 * time.Minute

// runHelper runs the helper program mode in a child process and returns
// its exit code.
func runHelper(mode string) int {
	time.AfterFunc(helperLifetime, func() {
		fmt.Fprintf(os.Stderr, "helper %s: still running after %v, exiting\n", mode, helperLifetime)
		os.Exit(exitTooLong)
	})
	switch mode {
	case helperLoop:
		return runLoop()
	case helperStall:
		return runStall()
	case helperMisuse:
		return runMisuse()
	case helperStallMid:
		return runStallMid()
	}
	if f, ok := localHelpers[mode]; ok {
		return f()
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
	return exitSetup
}

// localHelpers are helper modes without MPI, registered by the files that
// use them.
var localHelpers = map[string]func() int{}

// startRank starts MPI and writes this rank's pid to envDir/rank-<r>.pid.
func startRank() (*group.Group, int) {
	g, err := group.Init()
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper: %v\n", err)
		return nil, exitSetup
	}
	pid := filepath.Join(os.Getenv(envDir), fmt.Sprintf("rank-%d.pid", g.Rank()))
	// Write and rename, so that the parent never reads a partial file.
	if err := os.WriteFile(pid+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "helper: %v\n", err)
		return nil, exitSetup
	}
	if err := os.Rename(pid+".tmp", pid); err != nil {
		fmt.Fprintf(os.Stderr, "helper: %v\n", err)
		return nil, exitSetup
	}
	return g, exitOK
}

// runLoop repeats envOp (InitRemote from rank envSender, 0 or 1, to the
// other, Broadcast from rank 0, AllReduce with ReduceMax) on a float32 leaf
// of envBytes bytes until the process is killed, or envIters times (then
// it finalizes and exits 0); with envDeadline, each call has a WithContext
// deadline (the first at least firstCallDeadline: on a loaded machine the
// first 512 MiB transfer, which faults in fresh memory, can take longer
// than the deadline the tests interrupt later calls with); with envPause, the sender of InitRemote sleeps that long
// before each send but the first, and with envLate its receiver before
// each receive. Rank r's leaf holds r+1, so every result is known: a
// received InitRemote holds envSender+1 everywhere, a Broadcast 1, an
// AllReduce the group size; each is checked element by element. It logs (info) "iteration start", then
// "iteration done", "iteration failed" (the call's error) or "iteration
// wrong" (the first wrong element), each with its number, the call's
// duration in ms and the wall clock in unix ms ("t"); the library logs "op
// start" (and "op failed") itself. On a failure it exits at once, without
// finalizing MPI, whose MPI_Finalize would wait for the lost peer.
// firstCallDeadline is the shortest WithContext deadline of runLoop's
// first call.
const firstCallDeadline = 30 * time.Second

func runLoop() int {
	op := os.Getenv(envOp)
	n, err := strconv.Atoi(os.Getenv(envBytes))
	if err != nil || n < 8 {
		fmt.Fprintf(os.Stderr, "helper: %s=%q\n", envBytes, os.Getenv(envBytes))
		return exitSetup
	}
	deadline, _ := strconv.Atoi(os.Getenv(envDeadline))
	iters, _ := strconv.Atoi(os.Getenv(envIters))
	pause, _ := strconv.Atoi(os.Getenv(envPause))
	late, _ := strconv.Atoi(os.Getenv(envLate))
	sender, _ := strconv.Atoi(os.Getenv(envSender))
	if sender != 0 && sender != 1 {
		fmt.Fprintf(os.Stderr, "helper: %s=%q\n", envSender, os.Getenv(envSender))
		return exitSetup
	}
	g, code := startRank()
	if g == nil {
		return code
	}
	td := tensordict.New()
	if err := td.Set(tensordict.K("payload"), tensor.Full(tensor.Float32, float64(g.Rank()+1), n/4)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	td, err = td.Consolidate()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	lg := log.Logger
	for it := 0; iters <= 0 || it < iters; it++ {
		start := time.Now()
		lg().Info().Str("op", op).Int("iter", it).Int("bytes", n).Int64("t", start.UnixMilli()).Msg("iteration start")
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if deadline > 0 {
			d := time.Duration(deadline) * time.Millisecond
			if it == 0 {
				d = max(d, firstCallDeadline) // the first transfer also maps fresh memory
			}
			ctx, cancel = context.WithTimeout(ctx, d)
		}
		var got *tensordict.TensorDict
		want := float32(1)
		switch op {
		case "InitRemote":
			switch g.Rank() {
			case sender:
				if it > 0 {
					time.Sleep(time.Duration(pause) * time.Millisecond)
				}
				err = td.InitRemote(1-sender, tensordict.WithContext(ctx))
			case 1 - sender:
				time.Sleep(time.Duration(late) * time.Millisecond)
				got, err = tensordict.FromRemoteInit(sender, tensordict.WithContext(ctx))
				want = float32(sender + 1)
			}
		case "Broadcast":
			var out *tensordict.TensorDict
			out, err = td.Broadcast(0, tensordict.WithConsolidated(), tensordict.WithContext(ctx))
			if err == nil && g.Rank() != 0 {
				td, got = out, out
			}
		case "AllReduce":
			err = td.AllReduce(tensordict.ReduceMax, tensordict.WithContext(ctx))
			got, want = td, float32(g.Size())
		default:
			err = fmt.Errorf("unknown operation %q", op)
		}
		cancel()
		ms := float64(time.Since(start).Microseconds()) / 1000
		end := time.Now().UnixMilli()
		if err != nil {
			lg().Error().Err(err).Str("op", op).Int("iter", it).Float64("ms", ms).Int64("t", end).Msg("iteration failed")
			return exitOpFailed
		}
		if got != nil {
			if bad := checkFilled(got, want); bad != "" {
				lg().Error().Str("op", op).Int("iter", it).Float64("ms", ms).Int64("t", end).Str("wrong", bad).Msg("iteration wrong")
				return exitWrongData
			}
		}
		lg().Info().Str("op", op).Int("iter", it).Float64("ms", ms).Int64("t", end).Msg("iteration done")
	}
	if err := group.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitOpFailed
	}
	return exitOK
}

// checkFilled returns "" if td's payload holds want everywhere, otherwise
// what is wrong.
func checkFilled(td *tensordict.TensorDict, want float32) string {
	leaf, err := td.Get(tensordict.K("payload"))
	if err != nil {
		return err.Error()
	}
	data, err := tensor.Data[float32](leaf)
	if err != nil {
		return err.Error()
	}
	for i, v := range data {
		if v != want {
			return fmt.Sprintf("payload[%d] = %v, want %v (of %d)", i, v, want, len(data))
		}
	}
	return ""
}

// runStall: rank 0 sends two small TensorDicts with InitRemote and then
// stops, as a hung peer would; rank 1 receives with a deadline of
// envBytes milliseconds per receive. When its receive returns the context
// error, rank 1 logs it, writes envDir/deadline, and exits without
// finalizing MPI (MPI_Finalize would wait for the hung peer), so that
// mpirun ends the job.
func runStall() int {
	wait, err := strconv.Atoi(os.Getenv(envBytes))
	if err != nil {
		return exitSetup
	}
	g, code := startRank()
	if g == nil {
		return code
	}
	lg := log.Logger
	td := tensordict.New(2)
	if err := td.Set(tensordict.K("x"), tensor.Ones(tensor.Int64, 2)); err != nil {
		return exitSetup
	}
	switch g.Rank() {
	case 0:
		for range 2 {
			if err := td.InitRemote(1); err != nil {
				return exitOpFailed // the library logged "op failed"
			}
		}
		lg().Info().Msg("stalling")
		select {}
	case 1:
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(wait)*time.Millisecond)
			_, err := tensordict.FromRemoteInit(0, tensordict.WithContext(ctx))
			cancel()
			if err != nil {
				// The library logged "op failed" with err.
				fmt.Fprintf(os.Stderr, "receiver error: %v\n", err)
				_ = os.WriteFile(filepath.Join(os.Getenv(envDir), "deadline"), []byte(err.Error()), 0o644)
				return exitDeadline
			}
		}
	}
	select {}
}
