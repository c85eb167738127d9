// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Issue 12, item 10: collectives misused so that MPI never completes a
// step (crossed kinds, one rank alone, a subgroup freed on one rank only).
// With WithContext the library gives such a step up and leaves it to MPI,
// where it stays in progress: it can block MPI_Finalize, so each case runs
// in an mpirun job of its own (helperMisuse), never in the shared test job.

// Bounds of the misuse tests. Measured on the 2-core CI machine (5 runs,
// Open MPI 4.1.4, np 2 and 4; test/README.md, issue 12): a misused call
// returned after 1.30-1.31 s, the call after it within 0.1 ms, a whole
// job took 1.8-3.8 s.
const (
	misuseDeadline = 300 * time.Millisecond // WithContext of every call
	// misuseGrace is tensordict's stepGrace: how long a call waits for its
	// peers after its context ended before it abandons the step.
	misuseGrace = time.Second
	// misuseCallLimit bounds the first, misused call: deadline, grace and
	// a margin for 4 ranks on 2 busy cores.
	misuseCallLimit = misuseDeadline + misuseGrace + 1200*time.Millisecond
	// misuseNextLimit bounds the call after it, which must fail at once.
	misuseNextLimit = 250 * time.Millisecond
	// misuseJobLimit bounds a whole job, from mpirun's start to its end:
	// about 5 times the longest measured, for a loaded machine.
	misuseJobLimit = 20 * time.Second
	// misuseSync bounds the helpers' waits for each other's files.
	misuseSync = 10 * time.Second
	// misuseFinalizeWait is how long a helper gives group.Finalize before
	// it reports it blocked.
	misuseFinalizeWait = 5 * time.Second
	// misuseFinalizeQuick is how long a rank whose Finalize refused waits
	// for a rank that started Finalize and has not reported, before it
	// exits without MPI_Finalize (Finalize refuses at once, or blocks in
	// MPI_Finalize until every rank calls it or leaves).
	misuseFinalizeQuick = time.Second
)

// misuseCase is one misuse of a collective. The ranks of the job make a
// group of all of them with World().New, and each calls call(r, n) on it
// ("" for none) with misuseDeadline, then the same call again.
type misuseCase struct {
	name string
	nps  []int                 // rank counts it runs at
	call func(r, n int) string // the collective rank r of n calls: AllReduce, Broadcast (root 0), AllGather, or ""
	free bool                  // the last rank frees the group before its call
}

// lastCalls returns a call function: the last rank calls odd, the others
// call others.
func lastCalls(others, odd string) func(r, n int) string {
	return func(r, n int) string {
		if r == n-1 {
			return odd
		}
		return others
	}
}

var misuseCases = []misuseCase{
	// Open MPI pairs rank 0's agreement with rank 1's closing allreduce,
	// whose MIN names rank 0 as failed: before the fix rank 0 panicked.
	{"AllReduce vs Broadcast", []int{2, 4}, lastCalls("AllReduce", "Broadcast"), false},
	{"Broadcast vs AllReduce", []int{2, 4}, lastCalls("Broadcast", "AllReduce"), false},
	// Rank 1's Iallgatherv fails with MPI_ERR_TRUNCATE: before the fix,
	// the closing allreduce that followed died with SIGSEGV in libnbc.
	{"AllReduce vs AllGather", []int{2, 4}, lastCalls("AllReduce", "AllGather"), false},
	{"alone", []int{2, 4}, func(r, _ int) string {
		if r == 0 {
			return "AllReduce"
		}
		return ""
	}, false},
	{"freed on the last rank", []int{2, 4}, lastCalls("AllReduce", "AllReduce"), true},
}

// findMisuse returns the case named name.
func findMisuse(name string) (misuseCase, bool) {
	i := slices.IndexFunc(misuseCases, func(c misuseCase) bool { return c.name == name })
	if i < 0 {
		return misuseCase{}, false
	}
	return misuseCases[i], true
}

// misuseCall is one call's outcome, as a helper reports it.
type misuseCall struct {
	Err      string  `json:"err"` // "" if the call returned nil
	Ms       float64 `json:"ms"`
	Deadline bool    `json:"deadline"` // errors.Is(err, context.DeadlineExceeded)
	Broken   bool    `json:"broken"`   // errors.Is(err, group.ErrBroken)
	Freed    bool    `json:"freed"`    // errors.Is(err, group.ErrFreed)
}

// misuseResult is what rank Rank of a misuse job writes to
// envDir/result-<rank>.json before it finalizes.
type misuseResult struct {
	Rank     int        `json:"rank"`
	Call     string     `json:"call"`     // the collective called, "" for none
	FreeErr  string     `json:"freeErr"`  // the last rank of a free case: Free's error
	First    misuseCall `json:"first"`    // the misused call
	Next     misuseCall `json:"next"`     // the same call again, at once
	InFlight int        `json:"inFlight"` // mpix.InFlight() after both
}

// misuseFile returns the path of rank r's file kind in dir.
func misuseFile(dir, kind string, r int) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d", kind, r))
}

// misuseFiles describes the files the np helpers of job j wrote (what
// each did, and when, counted from start) and what each wrote to its
// stderr so far: what a job that did not end shows of itself.
func misuseFiles(j *job, np int, start time.Time) string {
	var b strings.Builder
	for r := range np {
		if log := j.rankLog(r); log != "" {
			fmt.Fprintf(&b, "rank %d: stderr: %s\n", r, log)
		}
		for _, kind := range []string{"result", "finalize-start", "finalize"} {
			path := misuseFile(j.dir, kind, r)
			fi, err := os.Stat(path)
			if err != nil {
				fmt.Fprintf(&b, "rank %d: no %s\n", r, kind)
				continue
			}
			data, _ := os.ReadFile(path)
			fmt.Fprintf(&b, "rank %d: %s at %v: %s\n", r, kind, fi.ModTime().Sub(start).Round(time.Millisecond), data)
		}
	}
	return b.String()
}

// writeAtomic writes b to path through a rename, so that a reader never
// sees a partial file.
func writeAtomic(path string, b []byte) error {
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// waitFiles waits until ok(r) holds for every rank r in ranks, or d has
// passed, polling the files of dir; it reports whether all held.
func waitFiles(ranks []int, d time.Duration, ok func(r int) bool) bool {
	end := time.Now().Add(d)
	for {
		all := true
		for _, r := range ranks {
			if !ok(r) {
				all = false
				break
			}
		}
		if all {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// runMisuseCall runs collective call on g with a context of
// misuseDeadline and reports its outcome.
func runMisuseCall(call string, g *group.Group, td *tensordict.TensorDict) misuseCall {
	ctx, cancel := context.WithTimeout(context.Background(), misuseDeadline)
	defer cancel()
	start := time.Now()
	var err error
	switch call {
	case "AllReduce":
		err = td.AllReduce(tensordict.ReduceSum, tensordict.WithGroup(g), tensordict.WithContext(ctx))
	case "Broadcast":
		_, err = td.Broadcast(0, tensordict.WithGroup(g), tensordict.WithContext(ctx))
	case "AllGather":
		_, err = td.AllGather(tensordict.WithGroup(g), tensordict.WithContext(ctx))
	default:
		err = fmt.Errorf("unknown collective %q", call)
	}
	c := misuseCall{Ms: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		c.Err = err.Error()
		c.Deadline = errors.Is(err, context.DeadlineExceeded)
		c.Broken = errors.Is(err, group.ErrBroken)
		c.Freed = errors.Is(err, group.ErrFreed)
	}
	return c
}

// runMisuse is the helper of TestMisusedCollectives: the case envCase on
// a group of every rank. Each rank makes its case's call twice (both with
// misuseDeadline), writes envDir/result-<rank> (a misuseResult), waits for
// every rank's result, then writes finalize-start-<rank>, calls
// group.Finalize and writes its outcome to finalize-<rank> ("ok", its
// error, or "blocked" after misuseFinalizeWait). A rank whose Finalize
// refused (an abandoned step in flight) waits until every other rank has
// reported its Finalize or has been in it for misuseFinalizeQuick, and
// exits with exitNoFinal without MPI_Finalize: mpirun then ends the job.
func runMisuse() int {
	c, ok := findMisuse(os.Getenv(envCase))
	if !ok {
		fmt.Fprintf(os.Stderr, "helper: %s=%q\n", envCase, os.Getenv(envCase))
		return exitSetup
	}
	dir := os.Getenv(envDir)
	w, code := startRank()
	if w == nil {
		return code
	}
	r, n := w.Rank(), w.Size()
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	g, err := w.New(ranks)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	td := tensordict.New()
	if err := td.Set(tensordict.K("payload"), tensor.Full(tensor.Float32, float64(r+1), 1024)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	res := misuseResult{Rank: r, Call: c.call(r, n)}
	if c.free && r == n-1 {
		if err := g.Free(); err != nil {
			res.FreeErr = err.Error()
		}
	}
	if res.Call == "" {
		// Sit the collective out until the callers have given up.
		var callers []int
		for q := range n {
			if c.call(q, n) != "" {
				callers = append(callers, q)
			}
		}
		waitFiles(callers, misuseSync, func(q int) bool { return exists(misuseFile(dir, "result", q)) })
	} else {
		res.First = runMisuseCall(res.Call, g, td)
		res.Next = runMisuseCall(res.Call, g, td)
	}
	res.InFlight = mpix.InFlight()
	b, _ := json.Marshal(res)
	if err := writeAtomic(misuseFile(dir, "result", r), b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	waitFiles(ranks, misuseSync, func(q int) bool { return exists(misuseFile(dir, "result", q)) })

	_ = writeAtomic(misuseFile(dir, "finalize-start", r), nil)
	done := make(chan error, 1)
	go func() { done <- group.Finalize() }()
	var outcome string
	select {
	case err := <-done:
		outcome = "ok"
		if err != nil {
			outcome = err.Error()
		}
	case <-time.After(misuseFinalizeWait):
		outcome = "blocked"
	}
	_ = writeAtomic(misuseFile(dir, "finalize", r), []byte(outcome))
	if outcome == "ok" {
		return exitOK
	}
	if outcome == "blocked" {
		select {} // in MPI_Finalize; mpirun ends the job
	}
	waitFiles(ranks, misuseSync, func(q int) bool {
		if exists(misuseFile(dir, "finalize", q)) {
			return true
		}
		fi, err := os.Stat(misuseFile(dir, "finalize-start", q))
		return err == nil && time.Since(fi.ModTime()) > misuseFinalizeQuick
	})
	return exitNoFinal
}

// startMisuseJob starts bin as helperMisuse on np ranks, with the helper
// parameters env (NAME=value), under Open MPI's mpirun, or under MPICH's
// mpiexec.hydra in a build with -tags mpich; the job is killed
// misuseJobLimit + 15 s after its start if still running (startJob).
func startMisuseJob(t *testing.T, bin string, np int, env ...string) *job {
	t.Helper()
	if mpi.Library() != mpi.FamilyMPICH {
		return startJob(t, bin, helperMisuse, np, misuseJobLimit+5*time.Second, nil, env...)
	}
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("MPICH's mpiexec.hydra is not installed: apt-get install mpich (make deps)")
	}
	j := &job{dir: t.TempDir(), done: make(chan struct{})}
	j.logs = filepath.Join(j.dir, "out")
	env = append(env, helperEnv+"="+helperMisuse, envDir+"="+j.dir)
	args := []string{"-n", strconv.Itoa(np)}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		args = append(args, "-genv", name, value)
	}
	args = append(args, bin)
	j.cmd = exec.Command(hydra, args...)
	j.cmd.Env = mpitest.CleanEnv(env...)
	j.start(t, misuseJobLimit+5*time.Second, nil)
	return j
}

// TestMisusedCollectives runs each misuse case of issue 12 item 10 in an
// mpirun job of its own (np 2, and np 4 where listed), every call with a
// WithContext of misuseDeadline, and checks that every calling rank's call
// returns an error wrapping context.DeadlineExceeded or group.ErrBroken
// within misuseCallLimit; that the same call again fails within
// misuseNextLimit with group.ErrBroken (group.ErrFreed on the rank that
// freed the group); and that the job ends within misuseJobLimit, leaving
// no process behind. A job still running at its limit is killed and the
// test fails. It logs the measured times and what group.Finalize did on
// each rank.
func TestMisusedCollectives(t *testing.T) {
	world := mpitest.Need(t, 1)
	needOwnJobs(t, world)
	if testing.Short() {
		t.Skip("starts an MPI job of its own per case; skipped in short mode")
	}
	for _, c := range misuseCases {
		for _, np := range c.nps {
			mpitest.Run(t, fmt.Sprintf("%s/np %d", c.name, np), func(t *testing.T) {
				if world.Rank() != 0 {
					return // rank 0 runs the job
				}
				bin := helperBinary(t, "tdmpi-misuse")
				start := time.Now()
				j := startMisuseJob(t, bin, np, envCase+"="+c.name)
				if !j.wait(misuseJobLimit) {
					if !j.ranksEnded() {
						// The cleanup of startJob kills the job's process group.
						require.Fail(t, "the job did not end", "still running after %v; mpirun:\n%s\nthe ranks' files:\n%s",
							misuseJobLimit, j.out.String(), misuseFiles(j, np, start))
					}
					// Every rank ended: the launcher hangs in its own abort.
					t.Logf("the ranks ended, the launcher (pid %d) still ran after %v: killed; the ranks' files:\n%s",
						j.cmd.Process.Pid, misuseJobLimit, misuseFiles(j, np, start))
					j.kill()
				}
				total := j.end.Sub(start)
				left := leftovers(bin, 5*time.Second)
				assert.Empty(t, left, "processes of %s left after the job", bin)
				for _, crash := range []string{"panic:", "SIGSEGV", "SIGBUS", "fatal error:"} {
					assert.NotContains(t, j.out.String(), crash, "a rank crashed")
				}

				var last time.Time
				var results []misuseResult
				var missing []int
				for r := range np {
					path := misuseFile(j.dir, "result", r)
					b, err := os.ReadFile(path)
					if err != nil {
						missing = append(missing, r)
						continue
					}
					if fi, err := os.Stat(path); err == nil && fi.ModTime().After(last) {
						last = fi.ModTime()
					}
					var res misuseResult
					require.NoError(t, json.Unmarshal(b, &res), "rank %d's result", r)
					results = append(results, res)
				}
				require.Empty(t, missing, "ranks that wrote no result (exit: %v); mpirun:\n%s", j.err, j.out.String())
				for _, res := range results {
					checkMisuse(t, c, np, res, finalizeOutcome(j.dir, res.Rank))
				}
				t.Logf("job: %v in all (exit: %v), ended %v after the last rank's result; leftover processes: %d",
					total.Round(time.Millisecond), j.err, j.end.Sub(last).Round(time.Millisecond), len(left))
				if t.Failed() {
					t.Logf("mpirun:\n%s", j.out.String())
				}
			})
		}
	}
}

// finalizeOutcome returns what group.Finalize did on rank r of the job
// whose helpers wrote to dir.
func finalizeOutcome(dir string, r int) string {
	if b, err := os.ReadFile(misuseFile(dir, "finalize", r)); err == nil {
		return string(b)
	}
	if exists(misuseFile(dir, "finalize-start", r)) {
		return "still in MPI_Finalize when the job ended"
	}
	return "not reached"
}

// checkMisuse checks and logs one rank's result of case c at np ranks;
// fin is what its group.Finalize did.
func checkMisuse(t *testing.T, c misuseCase, np int, res misuseResult, fin string) {
	t.Helper()
	r := res.Rank
	if res.Call == "" {
		t.Logf("rank %d: no collective; Finalize: %s", r, fin)
		return
	}
	freed := c.free && r == np-1
	t.Logf("rank %d: %s: %q after %.1f ms; again: %q after %.1f ms; in flight: %d; Finalize: %s",
		r, res.Call, res.First.Err, res.First.Ms, res.Next.Err, res.Next.Ms, res.InFlight, fin)
	if freed {
		assert.Empty(t, res.FreeErr, "rank %d: Free", r)
	}
	if assert.NotEmpty(t, res.First.Err, "rank %d: the misused %s returned nil", r, res.Call) {
		if freed {
			assert.True(t, res.First.Freed, "rank %d: %s on the group it freed should wrap group.ErrFreed: %s", r, res.Call, res.First.Err)
		} else {
			assert.True(t, res.First.Deadline || res.First.Broken,
				"rank %d: the misused %s should wrap context.DeadlineExceeded or group.ErrBroken: %s", r, res.Call, res.First.Err)
		}
	}
	limit := misuseCallLimit
	if freed {
		limit = misuseNextLimit
	}
	assert.Less(t, res.First.Ms, float64(limit.Milliseconds()), "rank %d: the misused %s took too long", r, res.Call)
	if freed {
		assert.True(t, res.Next.Freed, "rank %d: the next %s on the freed group: %q", r, res.Call, res.Next.Err)
	} else {
		assert.True(t, res.Next.Broken, "rank %d: the next %s should fail with group.ErrBroken: %q", r, res.Call, res.Next.Err)
	}
	assert.Less(t, res.Next.Ms, float64(misuseNextLimit.Milliseconds()), "rank %d: the next %s waited", r, res.Call)
}
