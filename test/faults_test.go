// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
)

// Bounds of the fault tests.
const (
	faultBytes      = 512 << 20 // payload of the killed operations
	faultShortBytes = 32 << 20  // under -short
	detectLimit     = 30 * time.Second
	jobLimit        = 100 * time.Second
)

// logLine is the part of a zerolog JSON line (of the library or of
// helperLoop) the fault tests read.
type logLine struct {
	Level   string  `json:"level"`
	Rank    int     `json:"rank"`
	Host    string  `json:"host"`
	Op      string  `json:"op"`
	Iter    int     `json:"iter"`
	Ms      float64 `json:"ms"`    // helperLoop: the call's duration
	T       int64   `json:"t"`     // helperLoop: wall clock, unix ms
	Error   string  `json:"error"` // the error of a failed call
	Wrong   string  `json:"wrong"` // helperLoop: the first wrong element
	Message string  `json:"message"`
}

// logLines parses the JSON lines of a rank's stderr, skipping others.
func logLines(s string) []logLine {
	var out []logLine
	for line := range strings.SplitSeq(s, "\n") {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Message != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestRankKilled kills one rank of a 2-rank job with SIGKILL in the middle
// of an InitRemote, a Broadcast and an AllReduce of 512 MiB (32 MiB under
// -short), and checks that mpirun ends the job within detectLimit and names
// the killed rank, that no process of the job is left, and that the
// surviving rank's log names the operation it was in.
//
// The library logs "op start" at info level when an operation starts
// (TDMPI_LOG=info); the helper logs "iteration start" and "iteration done"
// around each call, with the iteration number.
func TestRankKilled(t *testing.T) {
	world := mpitest.Need(t, 1)
	needOwnJobs(t, world)
	size := faultBytes
	if testing.Short() {
		size = faultShortBytes
	}
	tcp := strings.Fields(os.Getenv("TDMPI_TCP_FLAGS"))
	if len(tcp) == 0 {
		tcp = []string{"--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"}
	}
	cases := []struct {
		op     string
		victim int
		flags  []string
		short  bool
	}{
		{"InitRemote", 0, nil, true},
		{"Broadcast", 1, nil, true},
		{"AllReduce", 1, nil, true},
		{"InitRemote", 1, tcp, false},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/kill rank %d", c.op, c.victim)
		if c.flags != nil {
			name += "/tcp"
		}
		mpitest.Run(t, name, func(t *testing.T) {
			mpitest.Expect(t, jobLimit+30*time.Second)
			if testing.Short() && !c.short {
				t.Skip("one transport only under -short")
			}
			if world.Rank() != 0 {
				return // rank 0 runs the job
			}
			bin := helperBinary(t, "tdmpi-kill-"+strings.ToLower(c.op))
			j := startJob(t, bin, helperLoop, 2, jobLimit, c.flags,
				envOp+"="+c.op, fmt.Sprintf("%s=%d", envBytes, size), "TDMPI_LOG=info")
			survivor := 1 - c.victim
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			pid, err := j.rankPid(ctx, c.victim)
			require.NoError(t, err, "rank %d's pid; mpirun said:\n%s", c.victim, j.out.String())

			// Wait until the survivor has finished one operation and
			// started the next, then kill the victim a little later.
			for !strings.Contains(j.rankLog(survivor), `"iter":1,`) {
				select {
				case <-ctx.Done():
					t.Fatalf("rank %d never started a second %s; its log:\n%s\nmpirun:\n%s", survivor, c.op, j.rankLog(survivor), j.out.String())
				case <-j.done:
					t.Fatalf("the job ended before the kill: %v\n%s", j.err, j.out.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			killed := time.Now()
			ended := j.wait(detectLimit)
			require.True(t, ended, "the job still runs %v after rank %d was killed", detectLimit, c.victim)
			detect := j.end.Sub(killed)
			left := leftovers(bin, 5*time.Second)
			t.Logf("%s, %d MiB, rank %d killed: mpirun ended the job %v later (exit: %v); leftover processes: %d",
				c.op, size>>20, c.victim, detect.Round(time.Millisecond), j.err, len(left))

			assert.Error(t, j.err, "mpirun's exit status")
			assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`process rank %d with PID \d+ on node \S+ exited on signal 9`, c.victim)), j.out.String())
			assert.Empty(t, left, "processes of %s left after the job", bin)

			// The survivor's side of the operation: the receiver of an
			// InitRemote is in FromRemoteInit.
			op := c.op
			if op == "InitRemote" && survivor == 1 {
				op = "FromRemoteInit"
			}
			lines := logLines(j.rankLog(survivor))
			require.NotEmpty(t, lines, "rank %d logged nothing", survivor)
			last := lines[len(lines)-1]
			assert.Equal(t, "op start", last.Message, "rank %d's last log line should be the library's start of the interrupted operation", survivor)
			assert.Equal(t, op, last.Op, "rank %d's last log line should name the interrupted operation", survivor)
			library, iters := 0, 0
			for _, l := range lines {
				switch {
				case l.Message == "op start" && l.Op == op:
					library++
				case l.Message == "iteration start":
					iters++
				}
			}
			assert.Equal(t, iters, library, "rank %d: library start lines of %s vs iterations started", survivor, op)
			t.Logf("rank %d was in %s (iteration %d); library start lines naming %s: %d",
				survivor, last.Op, iters-1, op, library)
		})
	}
}

// TestReceiveDeadline: rank 0 of a 2-rank job stops sending (a hung peer);
// rank 1's FromRemoteInit, bounded by WithContext, returns the context's
// error, which it logs, and exits; mpirun then ends the job, killing the
// hung rank. Nothing is left behind.
func TestReceiveDeadline(t *testing.T) {
	needOwnJob(t)
	const wait = 2 * time.Second
	bin := helperBinary(t, "tdmpi-stall")
	start := time.Now()
	j := startJob(t, bin, helperStall, 2, jobLimit, nil,
		fmt.Sprintf("%s=%d", envBytes, wait.Milliseconds()), "TDMPI_LOG=info")
	require.True(t, j.wait(40*time.Second), "the job did not end; mpirun:\n%s", j.out.String())
	total := time.Since(start)
	left := leftovers(bin, 5*time.Second)
	b, err := os.ReadFile(j.dir + "/deadline")
	require.NoError(t, err, "rank 1 did not report its receive's error; mpirun:\n%s\nrank 1:\n%s", j.out.String(), j.rankLog(1))
	fi, _ := os.Stat(j.dir + "/deadline")
	msg := string(b)
	t.Logf("rank 1's error: %s", msg)
	t.Logf("job: %v in all; mpirun ended it %v after rank 1's receive gave up", total.Round(time.Millisecond), j.end.Sub(fi.ModTime()).Round(time.Millisecond))
	assert.Contains(t, msg, "context deadline exceeded")
	assert.Contains(t, msg, "FromRemoteInit")
	assert.Contains(t, msg, "rank 1 of 2, from rank 0")
	var ee *exec.ExitError
	if assert.ErrorAs(t, j.err, &ee) {
		assert.NotZero(t, ee.ExitCode())
	}
	assert.Regexp(t, `"op":"FromRemoteInit".*"message":"op failed"`, j.rankLog(1), "the library's failure line")
	assert.Contains(t, j.rankLog(0), `"message":"stalling"`)
	assert.Empty(t, left, "processes of %s left after the job", bin)
}

// TestFinalizeLateReceiver: rank 0 of a 2-rank job sends one small
// InitRemote, whose header message goes from a copy (mpix.SendCopy), and
// finalizes at once; rank 1 takes it only 3 s later. Rank 0's Finalize
// waits for it, as a blocking send would have, and the job succeeds:
// the send from a copy does not turn a late receiver into a failure.
func TestFinalizeLateReceiver(t *testing.T) {
	needOwnJob(t)
	const late = 3 * time.Second
	bin := helperBinary(t, "tdmpi-late")
	start := time.Now()
	j := startJob(t, bin, helperLoop, 2, jobLimit, nil, envOp+"=InitRemote", envBytes+"=1024", envIters+"=1",
		fmt.Sprintf("%s=%d", envLate, late.Milliseconds()), "TDMPI_LOG=info")
	require.True(t, j.wait(40*time.Second), "the job did not end; mpirun:\n%s", j.out.String())
	took := time.Since(start)
	t.Logf("job: %v", took.Round(time.Millisecond))
	require.NoError(t, j.err, "mpirun:\n%s\nrank 0:\n%s\nrank 1:\n%s", j.out.String(), j.rankLog(0), j.rankLog(1))
	for r := range 2 {
		_, ok := find(logLines(j.rankLog(r)), "iteration done", 0)
		assert.True(t, ok, "rank %d did not finish its call:\n%s", r, j.rankLog(r))
	}
	assert.GreaterOrEqual(t, took, late, "the job ended before the receiver took the message")
}
