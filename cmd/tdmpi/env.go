// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/mpi"
)

var envCmd = &command{
	name:  "env",
	args:  "",
	short: "print what each rank sees of its launcher and of MPI",
	long: `
Env starts MPI and prints, one block per rank in rank order (gathered to
rank 0), what each rank sees: the launcher and the rank and size it
promised, the rank and size MPI reports, the Slurm job, step and node list,
the thread level MPI provides, the MPI library version, the host, the
scratch directory and GOMAXPROCS.

When the launcher started several ranks but MPI sees a world of one (a PMI
mismatch: each rank started as a singleton), every rank prints its own
block with a warning, and env exits with status 1.

Run it the way the failing program is run:

	mpirun -np 2 tdmpi env
	srun --mpi=pmix -n 2 tdmpi env`,
	flags: func(fs *flag.FlagSet, sio *stdio) func([]string) error {
		return func(args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			return runEnv(sio)
		}
	},
}

// envInfo is what one rank reports.
type envInfo struct {
	Env        hpc.Env         // what the launcher's variables say
	Rank, Size int             // what MPI says
	Level      mpi.ThreadLevel // the thread level MPI provides
	Library    string          // the MPI library and its version
	Family     mpi.Family      // the MPI family tdmpi was built for
	GoMaxProcs int
	NumCPU     int
	PID        int
	Warning    string // the launch check's error, if any
}

// runEnv starts MPI, gathers every rank's envInfo to rank 0 and prints the
// blocks there.
func runEnv(sio *stdio) (err error) {
	if err := needMPI("env"); err != nil {
		return err
	}
	// mpi.InitThread, unlike group.Init, reports the level MPI provides.
	level, err := mpi.InitThread(mpi.ThreadMultiple)
	if err != nil {
		return fmt.Errorf("starting MPI: %w", err)
	}
	defer func() {
		if ferr := mpi.Finalize(); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}()
	info := envInfo{
		Level:   level,
		Library: mpi.LibraryName(),
		Family:  mpi.Library(),
		NumCPU:  runtime.NumCPU(),
		PID:     os.Getpid(),
	}
	// group.Init runs the launch check; since MPI is already started, it
	// leaves MPI running when the check fails, and a second Init without
	// the check gives the group env reports on.
	g, gerr := group.Init()
	if gerr != nil {
		var le *hpc.LaunchError
		if !errors.As(gerr, &le) {
			return gerr
		}
		info.Warning = gerr.Error()
		if g, err = group.Init(group.WithoutLaunchCheck()); err != nil {
			return err
		}
	}
	defer func() {
		if ferr := group.Finalize(); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}()
	info.Env = g.Env()
	info.Rank, info.Size = g.Rank(), g.Size()
	info.GoMaxProcs = runtime.GOMAXPROCS(0) // as group.Init left it

	blocks, err := gatherStrings(g.Comm(), formatEnv(info), 0)
	if err != nil {
		return err
	}
	if g.Rank() == 0 {
		fmt.Fprint(sio.out, strings.Join(blocks, "\n"))
	}
	if info.Warning != "" {
		return errors.New("launcher and MPI disagree on the number of ranks (see the warning above)")
	}
	return nil
}

// needMPI returns an error saying that MPI is not built in when tdmpi was
// built without cgo or with -tags nompi, for the commands (env, bench) that
// need it.
func needMPI(cmd string) error {
	if mpi.Library() != mpi.FamilyNone {
		return nil
	}
	return fmt.Errorf("MPI is not built in: %w; %s needs a tdmpi built with cgo, without -tags nompi, and an MPI library (Open MPI, or MPICH with -tags mpich)", mpi.ErrNoMPI, cmd)
}

// gatherStrings collects every rank's s at root, in rank order. Other
// ranks get nil.
func gatherStrings(c *mpi.Comm, s string, root int) ([]string, error) {
	n := c.Size()
	lens := make([]int64, n)
	if err := mpi.Gather(c, []int64{int64(len(s))}, lens, root); err != nil {
		return nil, fmt.Errorf("gathering block sizes: %w", err)
	}
	var (
		all    []byte
		counts []int
	)
	if c.Rank() == root {
		counts = make([]int, n)
		total := 0
		for i, l := range lens {
			counts[i] = int(l)
			total += int(l)
		}
		all = make([]byte, total)
	}
	if err := mpi.Gatherv(c, []byte(s), all, counts, nil, root); err != nil {
		return nil, fmt.Errorf("gathering blocks: %w", err)
	}
	if c.Rank() != root {
		return nil, nil
	}
	out := make([]string, n)
	off := 0
	for i, l := range counts {
		out[i] = string(all[off : off+l])
		off += l
	}
	return out, nil
}

// formatEnv formats one rank's block.
func formatEnv(info envInfo) string {
	e := info.Env
	var b strings.Builder
	line := func(name, format string, args ...any) {
		fmt.Fprintf(&b, "  %-11s %s\n", name, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(&b, "rank %d of %d (host %s, pid %d)\n", info.Rank, info.Size, orUnknown(e.Host), info.PID)
	line("launcher", "%s", e)
	line("mpi", "rank %d of %d, %s", info.Rank, info.Size, info.Level)
	line("library", "%s", orUnknown(info.Library))
	if info.Family != "" {
		line("built for", "%s", info.Family)
	}
	if e.JobID != "" {
		line("slurm", "job %s step %s nodes %s", e.JobID, orUnknown(e.StepID), orUnknown(e.NodeList))
		line("", "%d nodes, node id %d, tasks per node %v, cpus per task %d", e.NumNodes, e.NodeID, e.TasksPerNode, e.CPUsPerTask)
	} else {
		line("slurm", "none (not in a Slurm job)")
	}
	pmi := e.PMI
	if pmi == "" {
		pmi = "none"
	}
	line("pmi", "%s", pmi)
	line("scratch", "%s", orUnknown(e.Scratch))
	line("GOMAXPROCS", "%d (NumCPU %d)", info.GoMaxProcs, info.NumCPU)
	if info.GoMaxProcs < info.NumCPU {
		line("", "note: fewer Go processors than CPUs: set by GOMAXPROCS, or group.Init's fair share of CPUs this rank shares with others of the job (group.WithAllProcs keeps them all)")
	}
	line("go", "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if info.Warning != "" {
		fmt.Fprintf(&b, "  WARNING: %s\n", info.Warning)
	}
	return b.String()
}

// orUnknown returns s, or "?" if s is empty.
func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
