// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/finalmark"
	"github.com/tdmpi/tdmpi/mpi"
)

// AgreeTimeout is how long a rank waits for the others to reach the same
// verdict, unless the environment variable TDMPI_TEST_AGREE_TIMEOUT (a Go
// duration such as "2m") says otherwise: a minute, far beyond what a test
// takes longer on one rank than on the others (Expect covers those that
// do), and short enough that a hung job ends well within mpirun's
// --timeout (MPI_TIMEOUT, 300 s in the Makefile).
const AgreeTimeout = 60 * time.Second

// Exit codes of a rank whose peers did not agree.
const (
	exitInit     = 2 // group.Init failed
	exitNoAgree  = 3 // agreement timed out or ranks ran different tests
	exitFinalize = 4 // group.Finalize failed after passing tests
)

var (
	mu     sync.Mutex
	noMPI  bool // built without cgo: tests run as one process, without MPI
	h      *harness
	agreed = map[testing.TB]bool{}
	// expected holds, for the tests that called Expect, how much longer
	// than the harness timeout their agreement waits.
	expected = map[testing.TB]time.Duration{}
	failed   []string // names of tests that failed on this rank
)

// Main runs the tests of a package on every rank: it starts MPI with
// group.Init, runs m, makes every rank exit with the worst exit code of all
// ranks, prints which ranks failed, and stops MPI. Call it from TestMain:
//
//	func TestMain(m *testing.M) { mpitest.Main(m) }
//
// In a build without cgo (CGO_ENABLED=0), where group.Init returns
// mpi.ErrNoMPI, Main runs the tests as one process without MPI, and Need
// skips every test that needs it, saying why.
func Main(m *testing.M) {
	g, err := group.Init()
	if errors.Is(err, mpi.ErrNoMPI) {
		fmt.Fprintf(os.Stderr, "mpitest: %v: tests that need MPI skip\n", err)
		mu.Lock()
		noMPI = true
		mu.Unlock()
		os.Exit(m.Run())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: %v\n", err)
		os.Exit(exitInit)
	}
	timeout := AgreeTimeout
	if s := os.Getenv("TDMPI_TEST_AGREE_TIMEOUT"); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			timeout = d
		}
	}
	comm, err := g.Comm().Dup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: rank %d of %d: duplicating the world for the harness: %v\n", g.Rank(), g.Size(), err)
		os.Exit(exitInit)
	}
	mu.Lock()
	h = &harness{comm: comm, timeout: timeout}
	mu.Unlock()

	code := m.Run()

	mu.Lock()
	all, err := h.agree("mpitest.Main", int64(code), h.timeout)
	names := slices.Clone(failed)
	h = nil
	mu.Unlock()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: rank %d of %d: agreeing on the exit code: %v\n", g.Rank(), g.Size(), err)
		os.Exit(exitNoAgree)
	}
	worst, bad := 0, []int{}
	for r, c := range all {
		if c != 0 {
			bad = append(bad, r)
			worst = max(worst, int(c))
		}
	}
	if code != 0 {
		msg := "tests failed"
		if len(names) > 0 {
			msg += ": " + strings.Join(names, ", ")
		}
		fmt.Fprintf(os.Stderr, "mpitest: rank %d of %d: exit code %d: %s\n", g.Rank(), g.Size(), code, msg)
	}
	if g.Rank() == 0 && len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "mpitest: FAIL on ranks %v of %d\n", bad, g.Size())
	}
	if worst == 0 {
		finalmark.Print(os.Stderr, g.Rank(), g.Size())
	}
	ferr := comm.Free()
	if err := group.Finalize(); err != nil || ferr != nil {
		fmt.Fprintf(os.Stderr, "mpitest: rank %d of %d: finalize: %v %v\n", g.Rank(), g.Size(), ferr, err)
		if worst == 0 {
			worst = exitFinalize
		}
	}
	os.Exit(worst)
}

// Need returns the world group if it has at least n ranks, and skips the
// test otherwise, with a reason that says how to run it. It registers
// Agree to run when the test ends, so that every rank reaches the same
// verdict. It fails the test if Main did not start MPI.
func Need(t testing.TB, n int) *group.Group {
	t.Helper()
	g := group.World()
	mu.Lock()
	ready, none := h != nil, noMPI
	mu.Unlock()
	if none {
		t.Skipf("needs MPI: %v", mpi.ErrNoMPI)
		return nil
	}
	if g == nil || !ready {
		t.Fatalf("mpitest: Need: MPI is not running: call mpitest.Main(m) from TestMain")
		return nil
	}
	if g.Size() < n {
		t.Skipf("needs %d ranks, the world has %d: run under mpirun -np %d (see Makefile target test)", n, g.Size(), n)
		return nil
	}
	t.Cleanup(func() { Agree(t) })
	return g
}

// Agree makes every rank reach the same verdict on the current test: if it
// failed on any rank, it fails on every rank, with a message naming the
// ranks where it failed. Every rank must call Agree at the same point of
// the same test; Need arranges that by calling it when the test ends.
// Calling it again for the same test does nothing.
//
// If the other ranks do not reach Agree within AgreeTimeout (one is stuck
// in a receive, say), or are at another test, Agree prints why and exits
// the process, which makes mpirun end the job.
func Agree(t testing.TB) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if noMPI {
		return // one process: its verdict is the verdict
	}
	if h == nil {
		t.Errorf("mpitest: Agree: MPI is not running: call mpitest.Main(m) from TestMain")
		return
	}
	if agreed[t] {
		return
	}
	agreed[t] = true
	mine := int64(0)
	if t.Failed() {
		mine = 1
		failed = append(failed, t.Name())
	}
	extra := expected[t]
	delete(expected, t)
	all, err := h.agree(t.Name(), mine, h.timeout+extra)
	if err != nil {
		// The test's own log is lost with the exit: say at least whether
		// this rank failed it (a rank that fails before a collective
		// leaves the others waiting in it).
		verdict := "passed it"
		if mine != 0 {
			verdict = "FAILED it"
		}
		fmt.Fprintf(os.Stderr, "mpitest: rank %d of %d: %s: %v: this rank %s: exiting so that mpirun ends the job\n",
			h.comm.Rank(), h.comm.Size(), t.Name(), err, verdict)
		os.Exit(exitNoAgree)
	}
	var others []int
	for r, v := range all {
		if v != 0 && r != h.comm.Rank() {
			others = append(others, r)
		}
	}
	switch {
	case len(others) > 0 && mine == 0:
		failed = append(failed, t.Name())
		t.Errorf("mpitest: rank %d of %d: failed on rank(s) %v", h.comm.Rank(), h.comm.Size(), others)
	case len(others) > 0:
		t.Logf("mpitest: rank %d of %d: failed on rank(s) %v too", h.comm.Rank(), h.comm.Size(), others)
	}
}

// Expect tells the harness that the current test may take up to d longer
// on one rank than on the others, which then wait for its verdict at the
// end of the test: a test whose rank 0 alone runs a job of its own under
// mpirun, say. Agreement on its verdict waits AgreeTimeout plus d. Every
// rank must call it, before the test's paths part.
func Expect(t testing.TB, d time.Duration) {
	mu.Lock()
	defer mu.Unlock()
	expected[t] = max(expected[t], d)
}

// Run runs f as subtest name of t, like t.Run, and makes every rank agree
// on the subtest's verdict when it ends.
func Run(t *testing.T, name string, f func(t *testing.T)) bool {
	t.Helper()
	return t.Run(name, func(t *testing.T) {
		t.Cleanup(func() { Agree(t) })
		f(t)
	})
}

// Ctx returns a context that ends after d, or when the test ends, whichever
// is first. Pass it to receives that could otherwise wait forever.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
