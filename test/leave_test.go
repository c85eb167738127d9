// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// A rank that fails ends the job. Two ways of writing a program: the
// README's first pattern (Init, defer Finalize, return the error), where
// the failing rank's Finalize tells its peers that it leaves, and
// group.Main, which aborts the job. In both, rank 1 fails while the other
// ranks wait for it in a tdmpi call without a context; the job must end by
// itself, with a non-zero status and the errors printed.

const (
	helperLeave = "leave" // MPI: the README's pattern, rank 1 returns an error (envCase: what the others wait in)
	helperMain  = "main"  // MPI: group.Main, rank 1 fails (envCase: "error" or "panic")
)

func init() {
	localHelpers[helperLeave] = runLeave
	localHelpers[helperMain] = runMain
}

// failText is what the failing rank's error or panic says.
const failText = "rank 1 gives up on purpose"

// runLeave is a program in the README's first pattern whose helper
// returns an error, and whose main then exits with status 1.
func runLeave() int {
	if err := leaveProgram(os.Getenv(envCase)); err != nil {
		return exitOpFailed
	}
	return exitOK
}

// leaveProgram: rank 1 returns an error at once; the other ranks wait for
// it in the tdmpi call op names. Each prints its error before its
// deferred Finalize runs: a rank's Finalize returns only once every rank
// has entered Finalize, and mpirun kills the other ranks as soon as one
// exits non-zero, so an error printed after Finalize may be lost.
func leaveProgram(op string) (err error) {
	g, err := group.Init()
	if err != nil {
		return err
	}
	defer group.Finalize()
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "program error: %v\n", err)
		}
	}()
	if g.Rank() == 1 {
		if op == "DroppedIRecv" {
			dropIRecv()
		}
		return errors.New(failText)
	}
	if op == "DroppedIRecv" {
		// After rank 1's dropped IRecv has given up (dropIRecv).
		time.Sleep(xfer.DrainIdle + 2*time.Second)
		op = "Send"
	}
	return waitForRank1(g, op)
}

// dropIRecv starts an IRecv from rank 0 and drops its Pending without
// Wait; once collected, the IRecv waits xfer.DrainIdle for its header,
// then ends and leaves the transfer for a later receive. It returns a
// second after that.
func dropIRecv() {
	td := tensordict.New()
	if err := td.Set(tensordict.K("x"), tensor.Ones(tensor.Float32, leaveBig/4)); err != nil {
		return
	}
	if _, err := td.IRecv(0); err != nil {
		return
	}
	runtime.GC()
	runtime.GC()
	time.Sleep(xfer.DrainIdle + time.Second)
}

// leaveBig is the size of the transfers the sending cases send to rank 1:
// past every eager limit, MPI sends them only once rank 1 takes them.
const leaveBig = 8 << 20

// leaveJoined is the storage of the consolidated Send that travels in the
// header message, joined to it (mpix.SendConcat): past the eager limit.
const leaveJoined = 12 << 10

// waitForRank1 makes a call that waits for rank 1 of g: a collective, a
// receive from it, or a send to it that it must take.
func waitForRank1(g *group.Group, op string) error {
	n := 4
	switch op {
	case "Send", "ISend", "WaitAny", "InitRemote":
		n = leaveBig / 4
	case "SendJoined":
		n = leaveJoined / 4
	}
	td := tensordict.New()
	if err := td.Set(tensordict.K("x"), tensor.Ones(tensor.Float32, n)); err != nil {
		return err
	}
	switch op {
	case "Send":
		return td.Send(1)
	case "SendJoined":
		return td.Send(1, tensordict.WithConsolidated())
	case "ISend":
		p, err := td.ISend(1)
		if err != nil {
			return err
		}
		return p.Wait()
	case "WaitAny":
		p, err := td.ISend(1)
		if err != nil {
			return err
		}
		_, err = tensordict.WaitAny([]*tensordict.Pending{nil, p})
		return err
	case "IRecv":
		p, err := td.IRecv(1)
		if err != nil {
			return err
		}
		return p.Wait()
	case "InitRemote":
		return td.InitRemote(1)
	case "AllReduce":
		return td.AllReduce(tensordict.ReduceSum)
	case "Broadcast":
		_, err := td.Broadcast(1)
		return err
	case "Recv":
		_, err := td.Recv(1)
		return err
	case "FromRemoteInit":
		_, err := tensordict.FromRemoteInit(1)
		return err
	}
	return fmt.Errorf("unknown operation %q", op)
}

// runMain is a program written with group.Main: rank 1 returns an error
// or panics, as envCase says; the other ranks wait in AllReduce.
func runMain() int {
	group.Main(func(g *group.Group) error {
		if g.Rank() == 1 {
			if os.Getenv(envCase) == "panic" {
				panic(failText)
			}
			return errors.New(failText)
		}
		return waitForRank1(g, "AllReduce")
	})
	return exitSetup // not reached: Main exits
}

// leaveLimit bounds the jobs of these tests: they end in seconds, and
// hang without the fix; the limit only stops a hang.
const leaveLimit = 60 * time.Second

// TestFailingRankEndsJob: in the README's pattern, rank 1 returns an
// error, its deferred Finalize runs, and rank 0 waits for it without a
// context: in a collective, a receive, an IRecv's Wait, or a send of a
// message past the eager limit that rank 1 never takes (Send of 8 MiB per
// leaf, a consolidated Send of 12 KiB joined to its header message,
// ISend's Wait or WaitAny, InitRemote; the Send of 8 MiB too when rank 1
// had dropped an IRecv from rank 0, which gave up before the Send came).
// Rank 0's call returns an error naming rank 1, both print their errors,
// and the job ends with a non-zero status.
func TestFailingRankEndsJob(t *testing.T) {
	for _, c := range []struct {
		op   string
		np   int
		call string // the method named in the error, if not op
	}{
		{"AllReduce", 2, ""},
		{"AllReduce", 3, ""},
		{"Broadcast", 2, ""},
		{"Recv", 2, ""},
		{"FromRemoteInit", 2, ""},
		{"IRecv", 2, ""},
		{"Send", 2, ""},
		{"SendJoined", 2, "Send"},
		{"ISend", 2, ""},
		{"WaitAny", 2, "ISend"},
		{"InitRemote", 2, ""},
		{"DroppedIRecv", 2, "Send"},
	} {
		t.Run(fmt.Sprintf("%s/np%d", c.op, c.np), func(t *testing.T) {
			needOwnJob(t)
			bin := helperBinary(t, "tdmpi-leave")
			j := startJob(t, bin, helperLeave, c.np, leaveLimit, nil, envCase+"="+c.op)
			require.True(t, j.wait(leaveLimit+15*time.Second), "the job did not end; mpirun:\n%s", j.out.String())
			logs := ""
			for r := range c.np {
				logs += fmt.Sprintf("rank %d:\n%s\n", r, j.rankLog(r))
			}
			var ee *exec.ExitError
			if assert.ErrorAs(t, j.err, &ee, "mpirun:\n%s\n%s", j.out.String(), logs) {
				assert.NotZero(t, ee.ExitCode())
			}
			// Rank 1 prints before it sends its leave notice, which the
			// others wait for before they can exit.
			assert.Contains(t, j.rankLog(1), "program error: "+failText, logs)
			// Some waiting rank reports the leave (at np 3, one may see the
			// other's failure first).
			call := c.call
			if call == "" {
				call = c.op
			}
			reported := false
			for r := range c.np {
				l := j.rankLog(r)
				if r != 1 && strings.Contains(l, "program error: tensordict: "+call+": ") &&
					strings.Contains(l, fmt.Sprintf("rank 1 of %d %v", c.np, group.ErrPeerLeft)) {
					reported = true
				}
			}
			assert.True(t, reported, "no waiting rank reported rank 1's leave:\n%s", logs)
		})
	}
}

// TestMainAbortsJob: under group.Main at np 3, rank 1 returns an error or
// panics while ranks 0 and 2 wait in AllReduce. Main prints rank 1's error
// (the panic's value and stack) and aborts the job, which ends with a
// non-zero status.
func TestMainAbortsJob(t *testing.T) {
	for _, c := range []struct {
		name string
		want []string
	}{
		{"error", []string{"rank 1 of 3 (", "): " + failText}},
		{"panic", []string{"rank 1 of 3 (", "): panic: " + failText, "goroutine ", "test.runMain"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			needOwnJob(t)
			bin := helperBinary(t, "tdmpi-main")
			j := startJob(t, bin, helperMain, 3, leaveLimit, nil, envCase+"="+c.name)
			require.True(t, j.wait(leaveLimit+15*time.Second), "the job did not end; mpirun:\n%s", j.out.String())
			var ee *exec.ExitError
			if assert.ErrorAs(t, j.err, &ee, "mpirun:\n%s", j.out.String()) {
				assert.NotZero(t, ee.ExitCode())
			}
			for _, w := range c.want {
				assert.Contains(t, j.rankLog(1), w, "rank 1's output; mpirun:\n%s", j.out.String())
			}
		})
	}
}
