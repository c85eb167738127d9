// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
)

func TestMain(m *testing.M) { Main(m) }

// recorder is a testing.TB that records failures and skips instead of
// acting on them, so the harness can be tested without failing the test.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	failed  bool
	errors  []string
	skipped string
}

func (r *recorder) Helper() {}
func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recorder) Logf(string, ...any) {}

func TestAgreeSpreadsFailure(t *testing.T) {
	g := Need(t, 2)
	rec := &recorder{TB: t}
	if g.Rank() == 1 {
		rec.Errorf("deliberate failure on rank 1")
	}
	Agree(rec)
	assert.True(t, rec.Failed(), "every rank must see the failure of rank 1")
	if g.Rank() != 1 {
		require.Len(t, rec.errors, 1)
		assert.Equal(t, fmt.Sprintf("mpitest: rank %d of %d: failed on rank(s) [1]", g.Rank(), g.Size()), rec.errors[0])
	} else {
		assert.Len(t, rec.errors, 1, "the failing rank gets no second error")
	}

	// A second Agree for the same test does nothing (and sends nothing).
	Agree(rec)
	assert.Len(t, rec.errors, 1)
}

func TestAgreeAllPass(t *testing.T) {
	Need(t, 2)
	rec := &recorder{TB: t}
	Agree(rec)
	assert.False(t, rec.Failed())
	assert.Empty(t, rec.errors)
}

func TestAgreeSeveralFailures(t *testing.T) {
	g := Need(t, 2)
	rec := &recorder{TB: t}
	if g.Rank() != 0 {
		rec.Errorf("deliberate failure")
	}
	Agree(rec)
	assert.True(t, rec.Failed())
	if g.Rank() == 0 {
		want := make([]string, 0, g.Size()-1)
		for r := 1; r < g.Size(); r++ {
			want = append(want, fmt.Sprint(r))
		}
		assert.Equal(t, []string{fmt.Sprintf("mpitest: rank 0 of %d: failed on rank(s) [%s]", g.Size(), strings.Join(want, " "))}, rec.errors)
	}
}

// skipWithoutMPI skips tests of the harness itself in a build without cgo.
func skipWithoutMPI(t *testing.T) {
	t.Helper()
	if noMPI {
		t.Skipf("tests the MPI harness: %v", mpi.ErrNoMPI)
	}
}

func TestNeedWithoutMPI(t *testing.T) {
	if !noMPI {
		t.Skip("tests the build without cgo (CGO_ENABLED=0); this one has MPI")
	}
	rec := &recorder{TB: t}
	assert.Nil(t, Need(rec, 1))
	assert.Contains(t, rec.skipped, "needs MPI: tdmpi was built without cgo")
	assert.False(t, rec.Failed())
	Agree(rec)
	assert.False(t, rec.Failed(), "Agree without MPI keeps the verdict")
}

func TestNeedSkipsWithReason(t *testing.T) {
	skipWithoutMPI(t)
	rec := &recorder{TB: t}
	g := Need(rec, 1<<20)
	assert.Nil(t, g)
	assert.Contains(t, rec.skipped, "needs 1048576 ranks, the world has")
	assert.Contains(t, rec.skipped, "run under mpirun -np 1048576 (see Makefile target test)")
	assert.False(t, rec.Failed())
}

func TestNeedOneRank(t *testing.T) {
	g := Need(t, 1)
	require.NotNil(t, g)
	assert.Same(t, group.World(), g)
}

func TestNeedWithoutMain(t *testing.T) {
	skipWithoutMPI(t)
	mu.Lock()
	saved := h
	h = nil
	mu.Unlock()
	defer func() {
		mu.Lock()
		h = saved
		mu.Unlock()
	}()
	rec := &recorder{TB: t}
	assert.Nil(t, Need(rec, 1))
	require.Len(t, rec.errors, 1)
	assert.Contains(t, rec.errors[0], "call mpitest.Main(m) from TestMain")
}

// dupHarness makes a harness on a private duplicate of the world.
func dupHarness(t *testing.T, g *group.Group, timeout time.Duration) *harness {
	t.Helper()
	comm, err := g.Comm().Dup()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, comm.Free()) })
	return &harness{comm: comm, timeout: timeout}
}

func TestHarnessDetectsDifferentTests(t *testing.T) {
	g := Need(t, 2)
	hh := dupHarness(t, g, 10*time.Second)
	name := "TestSame"
	if g.Rank() == 1 {
		name = "TestOther"
	}
	_, err := hh.agree(name, 0, hh.timeout)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ranks are not at the same test")

	// The harness still works once the ranks are in step again.
	all, err := hh.agree("TestSame", int64(g.Rank()), hh.timeout)
	require.NoError(t, err)
	for r, v := range all {
		assert.EqualValues(t, r, v)
	}
}

func TestHarnessTimesOut(t *testing.T) {
	g := Need(t, 2)
	hh := dupHarness(t, g, 200*time.Millisecond)
	if g.Rank() == 0 {
		start := time.Now()
		_, err := hh.agree("TestAlone", 0, hh.timeout)
		require.Error(t, err)
		assert.True(t, errors.Is(err, errTimeout), "error %v", err)
		assert.Less(t, time.Since(start), 5*time.Second)
	}
	require.NoError(t, g.Barrier())
}

// Expect lengthens the wait for one test's verdict: with a harness that
// waits 200 ms, a subtest that takes 600 ms longer on rank 0 than on the
// others still agrees (without Expect, rank 1 would give up and exit).
func TestExpectLengthensAgreement(t *testing.T) {
	g := Need(t, 2)
	short := dupHarness(t, g, 200*time.Millisecond)
	mu.Lock()
	old := h
	h = short
	mu.Unlock()
	defer func() {
		mu.Lock()
		h = old
		mu.Unlock()
	}()
	Run(t, "slow on rank 0", func(t *testing.T) {
		Expect(t, 5*time.Second)
		if g.Rank() == 0 {
			time.Sleep(600 * time.Millisecond)
		}
	})
	mu.Lock()
	n := len(expected)
	mu.Unlock()
	assert.Zero(t, n, "Expect's entry outlived its test")
}

func TestRunAgrees(t *testing.T) {
	g := Need(t, 1)
	ran := false
	ok := Run(t, "sub", func(t *testing.T) {
		ran = true
		assert.Equal(t, g.Size(), group.World().Size())
	})
	assert.True(t, ok)
	assert.True(t, ran)
}

func TestCtx(t *testing.T) {
	before := time.Now()
	ctx := Ctx(t, 50*time.Millisecond)
	dl, ok := ctx.Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, before.Add(50*time.Millisecond), dl, 40*time.Millisecond)
	select {
	case <-ctx.Done():
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("context did not end")
	}
}

// TestSelf is the test the end-to-end tests run in a child mpirun job; it
// does nothing in a normal run.
func TestSelf(t *testing.T) {
	mode := os.Getenv("MPITEST_SELF")
	if mode == "" {
		t.Skip("runs only as the child of TestEndToEnd")
	}
	g := Need(t, 2)
	switch mode {
	case "fail":
		if g.Rank() == 1 {
			t.Error("deliberate failure on rank 1")
		}
	case "hang":
		// Rank 1 waits for a message rank 0 never sends; rank 0 fails.
		if g.Rank() == 1 {
			buf := make([]byte, 1)
			_, _ = mpi.Recv(g.Comm(), buf, 0, 99)
		} else {
			t.Error("deliberate failure on rank 0")
		}
	}
}

func TestEndToEnd(t *testing.T) {
	if os.Getenv("MPITEST_SELF") != "" {
		t.Skip("already a child")
	}
	g := Need(t, 1)
	if g.Size() != 1 {
		t.Skip("starts its own mpirun job: runs only in a plain go test (one rank)")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed")
	}
	for _, test := range []struct {
		mode string
		want []string
	}{
		{"fail", []string{
			"mpitest: rank 0 of 2: failed on rank(s) [1]",
			"deliberate failure on rank 1",
			"mpitest: FAIL on ranks [0 1] of 2",
		}},
		{"hang", []string{
			"exiting so that mpirun ends the job",
		}},
	} {
		t.Run(test.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, mpirun, "-np", "2", "--oversubscribe", "--bind-to", "none",
				"--timeout", "50", os.Args[0], "-test.run", "^TestSelf$", "-test.count", "1")
			cmd.Env = CleanEnv("MPITEST_SELF="+test.mode, "TDMPI_TEST_AGREE_TIMEOUT=2s",
				"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			start := time.Now()
			out, err := cmd.CombinedOutput()
			elapsed := time.Since(start)
			require.Error(t, err, "the child job must fail; output:\n%s", out)
			require.NoError(t, ctx.Err(), "the child job hung; output:\n%s", out)
			for _, w := range test.want {
				assert.Contains(t, string(out), w)
			}
			assert.Less(t, elapsed, 30*time.Second, "output:\n%s", out)
			t.Logf("child job ended in %v", elapsed.Round(time.Millisecond))
		})
	}
}

func TestCleanEnv(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("PMI_FD", "6")
	t.Setenv("MPI_LOCALNRANKS", "2")
	t.Setenv("PMIX_RANK", "1")
	t.Setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
	t.Setenv("MPITEST_KEEP", "yes")
	env := strings.Join(CleanEnv("EXTRA=1"), "\n") + "\n"
	assert.NotContains(t, env, "OMPI_COMM_WORLD_SIZE=")
	assert.NotContains(t, env, "PMI_FD=", "MPICH Hydra's variables go too")
	assert.NotContains(t, env, "MPI_LOCALNRANKS=")
	assert.NotContains(t, env, "PMIX_RANK=")
	assert.Contains(t, env, "OMPI_ALLOW_RUN_AS_ROOT=1\n")
	assert.Contains(t, env, "MPITEST_KEEP=yes\n")
	assert.True(t, strings.HasSuffix(env, "EXTRA=1\n"))
}

// TestAgreeCost measures one agreement round, which every multi-rank test
// pays once.
func TestAgreeCost(t *testing.T) {
	g := Need(t, 2)
	hh := dupHarness(t, g, 10*time.Second)
	const rounds = 200
	start := time.Now()
	for i := range rounds {
		all, err := hh.agree("TestAgreeCost", int64(i%2), hh.timeout)
		require.NoError(t, err)
		require.Len(t, all, g.Size())
		for _, v := range all {
			require.EqualValues(t, i%2, v)
		}
	}
	per := time.Since(start) / rounds
	t.Logf("rank %d of %d: %v per agreement", g.Rank(), g.Size(), per)
	assert.Less(t, per, 50*time.Millisecond)
}
