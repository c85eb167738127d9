// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import (
	"os"
	"strconv"
	"strings"
)

// Env describes the launcher and scheduler environment of the process.
// Numbers the environment does not give are -1 (ranks and sizes) or 0
// (counts); strings it does not give are empty.
type Env struct {
	// Launcher is the program that started the process.
	Launcher Launcher

	// PMI names the process-management interface whose variables are
	// present: "pmix", "pmi" (PMI-1 or PMI-2) or "" when there are none.
	// MPI needs one of them to learn its peers; an srun task without any
	// runs as a singleton.
	PMI string

	// Rank and Size are this process's rank and the number of ranks, as
	// the launcher gives them. A Singleton is rank 0 of 1; a SlurmBatch
	// process has -1 for both, since no launcher assigned it a rank.
	Rank, Size int

	// LocalRank and LocalSize are the rank among, and the number of, the
	// ranks of the same job on this node.
	LocalRank, LocalSize int

	// NodeID is the index of this node among the nodes of the Slurm step
	// or job (SLURM_NODEID), -1 outside Slurm.
	NodeID int

	// JobID and StepID identify the Slurm job and step.
	JobID, StepID string

	// NodeList is the Slurm node list in its compact form, e.g.
	// "node[01-04,07]": the step's nodes in a step, else the job's.
	NodeList string

	// NumNodes is the number of nodes of the step or job, 0 if unknown.
	NumNodes int

	// TasksPerNode is the number of tasks on each node of NodeList, in
	// order, expanded from Slurm's "2(x3),1" form; nil if unknown.
	TasksPerNode []int

	// CPUsPerTask is the value of srun/sbatch --cpus-per-task, 0 if unset.
	CPUsPerTask int

	// Host is the host name of this node.
	Host string

	// Scratch is a node-local directory for temporary files: the first of
	// $SLURM_TMPDIR, $TMPDIR, /dev/shm (if it is a directory) and
	// os.TempDir(). It follows each process's environment, which can differ
	// between ranks of one node (Slurm 22.05's srun sets TMPDIR for task 0
	// only): ranks that share files there should agree on one path first.
	Scratch string

	// MPI is the MPI library the program runs, in a few words ("Open MPI
	// v4.1.4", "MPICH 4.0.2"), or "" if unknown. The launcher's variables
	// do not tell it: Detect leaves it empty, and group.Init fills it in
	// from the library (mpi.LibraryName), so Group.Env reports it.
	MPI string
}

// Detect describes the environment of the running process.
func Detect() Env {
	return DetectFrom(os.Getenv)
}

// DetectFrom describes the environment that getenv gives. It reads nothing
// but getenv, except for the host name (os.Hostname) and, when neither
// SLURM_TMPDIR nor TMPDIR is set, whether /dev/shm is a directory.
func DetectFrom(getenv func(string) string) Env {
	return detect(getenv, system{})
}

// system holds the few facts detect takes from outside the environment, so
// tests can replace them.
type sysinfo interface {
	hostname() (string, error)
	isDir(path string) bool
	tempDir() string
}

type system struct{}

func (system) hostname() (string, error) { return os.Hostname() }
func (system) tempDir() string           { return os.TempDir() }
func (system) isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// Slurm's reserved step ids for the batch script and the "extern" step that
// holds processes not started by srun.
const (
	slurmBatchStep  = "4294967294"
	slurmExternStep = "4294967295"
)

func detect(getenv func(string) string, sys sysinfo) Env {
	// first returns the value of the first set variable among keys.
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	num := func(def int, keys ...string) int {
		v := first(keys...)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return def
		}
		return n
	}

	e := Env{
		Rank:      -1,
		Size:      -1,
		LocalRank: -1,
		LocalSize: -1,
		NodeID:    -1,
	}
	switch {
	case first("PMIX_RANK", "PMIX_NAMESPACE") != "":
		e.PMI = "pmix"
	case first("PMI_FD", "PMI_RANK", "PMI_SIZE") != "":
		e.PMI = "pmi"
	}

	// Slurm facts, whatever the launcher.
	e.JobID = first("SLURM_JOB_ID", "SLURM_JOBID")
	step := first("SLURM_STEP_ID", "SLURM_STEPID")
	inStep := step != "" && step != slurmBatchStep && step != slurmExternStep &&
		step != "batch" && step != "extern"
	if e.JobID != "" {
		e.NodeID = num(-1, "SLURM_NODEID")
		e.CPUsPerTask = num(0, "SLURM_CPUS_PER_TASK")
		if inStep {
			e.StepID = step
			e.NodeList = first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
			e.NumNodes = num(0, "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
			e.TasksPerNode = ParseTasksPerNode(first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"))
		} else {
			e.NodeList = first("SLURM_JOB_NODELIST", "SLURM_NODELIST")
			e.NumNodes = num(0, "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
			e.TasksPerNode = ParseTasksPerNode(getenv("SLURM_TASKS_PER_NODE"))
		}
	}

	switch {
	case getenv("OMPI_COMM_WORLD_SIZE") != "":
		e.Launcher = Mpirun
		e.Rank = num(-1, "OMPI_COMM_WORLD_RANK")
		e.Size = num(-1, "OMPI_COMM_WORLD_SIZE")
		e.LocalRank = num(-1, "OMPI_COMM_WORLD_LOCAL_RANK")
		e.LocalSize = num(-1, "OMPI_COMM_WORLD_LOCAL_SIZE")
	case getenv("PMI_SIZE") != "" && (getenv("MPI_LOCALNRANKS") != "" || !inStep):
		// MPICH Hydra. srun --mpi=pmi2 also sets PMI_SIZE, but only Hydra
		// sets MPI_LOCALNRANKS, and outside a step srun is not the launcher.
		e.Launcher = Mpirun
		e.Rank = num(-1, "PMI_RANK")
		e.Size = num(-1, "PMI_SIZE")
		e.LocalRank = num(-1, "MPI_LOCALRANKID")
		e.LocalSize = num(-1, "MPI_LOCALNRANKS")
	case e.JobID != "" && inStep:
		e.Launcher = Srun
		e.Rank = num(-1, "SLURM_PROCID")
		e.Size = num(-1, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
		e.LocalRank = num(-1, "SLURM_LOCALID")
		if e.NodeID >= 0 && e.NodeID < len(e.TasksPerNode) {
			e.LocalSize = e.TasksPerNode[e.NodeID]
		}
	case e.JobID != "":
		e.Launcher = SlurmBatch
	case e.PMI != "":
		// Some other PMI launcher (prterun, a PMIx server): it started us,
		// but its variables do not give the size.
		e.Launcher = Mpirun
		e.Rank = num(-1, "PMIX_RANK", "PMI_RANK")
	default:
		e.Launcher = Singleton
		e.Rank, e.Size = 0, 1
		e.LocalRank, e.LocalSize = 0, 1
	}

	if h, err := sys.hostname(); err == nil && h != "" {
		e.Host = h
	} else {
		e.Host = first("SLURMD_NODENAME", "HOSTNAME")
	}

	e.Scratch = first("SLURM_TMPDIR", "TMPDIR")
	if e.Scratch == "" {
		if sys.isDir("/dev/shm") {
			e.Scratch = "/dev/shm"
		} else {
			e.Scratch = sys.tempDir()
		}
	}
	return e
}

// String returns a one-line description, for example
// "srun rank 1/4 local 1/2 job 812 step 0 nodes n[1-2] host n1 pmi pmix scratch /tmp".
// Unknown numbers print as "?".
func (e Env) String() string {
	n := func(v int) string {
		if v < 0 {
			return "?"
		}
		return strconv.Itoa(v)
	}
	var b strings.Builder
	b.WriteString(e.Launcher.String())
	if e.Rank >= 0 || e.Size >= 0 {
		b.WriteString(" rank " + n(e.Rank) + "/" + n(e.Size))
	}
	if e.LocalRank >= 0 || e.LocalSize >= 0 {
		b.WriteString(" local " + n(e.LocalRank) + "/" + n(e.LocalSize))
	}
	if e.JobID != "" {
		b.WriteString(" job " + e.JobID)
	}
	if e.StepID != "" {
		b.WriteString(" step " + e.StepID)
	}
	if e.NodeList != "" {
		b.WriteString(" nodes " + e.NodeList)
	}
	if e.Host != "" {
		b.WriteString(" host " + e.Host)
	}
	if e.PMI != "" {
		b.WriteString(" pmi " + e.PMI)
	}
	if e.Scratch != "" {
		b.WriteString(" scratch " + e.Scratch)
	}
	return b.String()
}
