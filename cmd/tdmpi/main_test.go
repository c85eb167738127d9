// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/mpi"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// buildTdmpi builds the tdmpi binary once per test run and returns its
// path.
func buildTdmpi(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "tdmpi-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "tdmpi")
		out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = &buildError{out: string(out), err: err}
		}
	})
	require.NoError(t, binary.err)
	return binary.path
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// needMpirun returns the path of mpirun, or skips the test.
func needMpirun(t *testing.T) string {
	t.Helper()
	if mpi.Library() == mpi.FamilyNone {
		t.Skipf("needs MPI: %v", mpi.ErrNoMPI)
	}
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		t.Skip("the test runs under mpirun already; it starts its own mpirun")
	}
	p, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)")
	}
	return p
}

// mpirunEnv is the environment of the mpirun the tests start: as root,
// Open MPI refuses to start without these.
func mpirunEnv() []string {
	return append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"no command", nil, exitUsage, []string{"Usage:", "inspect", "bench", "env", "version"}},
		{"-h", []string{"-h"}, exitOK, []string{"The commands are:"}},
		{"help", []string{"help"}, exitOK, []string{"The commands are:"}},
		{"help inspect", []string{"help", "inspect"}, exitOK, []string{"usage: tdmpi inspect [-json] [-n N] DIR|FILE", "-json"}},
		{"help unknown", []string{"help", "frob"}, exitUsage, []string{"tdmpi help frob: unknown command"}},
		{"unknown command", []string{"frob"}, exitUsage, []string{"tdmpi frob: unknown command", "tdmpi -h"}},
		{"inspect -h", []string{"inspect", "-h"}, exitOK, []string{"usage: tdmpi inspect", "Flags:", "-n N"}},
		{"bench -h", []string{"bench", "-h"}, exitOK, []string{"usage: tdmpi bench [flags]", "-max size", "raw-p2p"}},
		{"env -h", []string{"env", "-h"}, exitOK, []string{"usage: tdmpi env\n", "(a PMI\nmismatch"}},
		{"version -h", []string{"version", "-h"}, exitOK, []string{"usage: tdmpi version"}},
		{"version extra", []string{"version", "x"}, exitUsage, []string{`unexpected argument "x"`}},
		{"env extra", []string{"env", "x"}, exitUsage, []string{`unexpected argument "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runTdmpi(tt.args...)
			assert.Equal(t, tt.code, code)
			assert.Empty(t, stdout, "usage goes to stderr")
			for _, s := range tt.stderr {
				assert.Contains(t, stderr, s)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runTdmpi("version")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "tdmpi    github.com/tdmpi/tdmpi")
	assert.Contains(t, stdout, "go       go1.")
	assert.Regexp(t, `(?m)^mpi      (Open MPI v\d|MPICH|\S)`, stdout)
}

func TestWriteVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99",
		Main:      debug.Module{Path: "github.com/tdmpi/tdmpi", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	var b strings.Builder
	writeVersion(&b, bi, "Open MPI v4.1.4, package: Debian")
	got := b.String()
	assert.Contains(t, got, "tdmpi    github.com/tdmpi/tdmpi v1.2.3\n")
	assert.Contains(t, got, "revision abc123 2025-01-02T03:04:05Z (modified)\n")
	assert.Contains(t, got, "go       go1.99 ")
	assert.Contains(t, got, "mpi      Open MPI v4.1.4, package: Debian\n")

	b.Reset()
	writeVersion(&b, nil, "")
	assert.Contains(t, b.String(), "tdmpi    github.com/tdmpi/tdmpi unknown\n")
	assert.NotContains(t, b.String(), "revision")
	assert.Contains(t, b.String(), "mpi      unknown")
}
