// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package hpc describes the environment a tdmpi process was started in: which
// launcher started it (none, mpirun, srun, or a Slurm batch script), the rank
// and size the launcher assigned, the Slurm job and step, the node list and
// a node-local scratch directory.
//
// The description comes only from environment variables, read before MPI is
// initialized, so it is cheap and never blocks:
//
//	env := hpc.Detect()
//	fmt.Println(env) // srun rank 1/4 local 1/2 job 812 step 0 nodes n[1-2] host n1 pmi pmix scratch /tmp
//
// # Launchers
//
// Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK and their
// LOCAL variants in every rank; MPICH's Hydra sets PMI_SIZE and PMI_RANK.
// Both are reported as Mpirun, also when mpirun runs inside a Slurm
// allocation. A process started by srun has SLURM_STEP_ID and
// SLURM_PROCID; it is reported as Srun. A process inside a Slurm allocation
// but outside any step (the batch script itself, or an salloc shell) is
// SlurmBatch: it is one process, whatever the allocation's task count.
// Anything else is a Singleton.
//
// # Wrong-PMI launches
//
// When the launcher's PMI does not match the MPI library, a launcher may
// start N copies of the program that each initialize MPI as a singleton of
// size 1. Env.CheckSize recognizes this: the launcher reports N > 1 ranks
// but MPI sees one. Package group runs the check in group.Init.
//
// Some libraries fail earlier: Debian's Open MPI 4.1 under srun --mpi=none
// aborts inside MPI_Init with its own message ("OMPI was not built with
// SLURM's PMI support"), before any Go code can report it. Use
// srun --mpi=pmix with Open MPI.
//
// # Pure detection
//
// DetectFrom takes the variable lookup as a function, so tests and tools can
// describe a fake environment:
//
//	env := hpc.DetectFrom(func(k string) string { return fake[k] })
//
// # Files
//
//	env.go        Env, Detect, DetectFrom: what the launcher and Slurm say
//	launcher.go   Launcher: Singleton, Mpirun, Srun, SlurmBatch
//	check.go      CheckSize, LaunchError: the wrong-PMI check
//	tasks.go      ParseTasksPerNode: Slurm's "2(x3),1" notation
//	cpus.go       OnlineCPUs and AffinityMask: the CPUs online, and those this process may run on
//	slurm/        sbatch job scripts to copy (srun-pmix, mpirun, test-suite)
//	scripts/      the shell behind the Makefile: deps.sh (apt packages),
//	              examples.sh (build, run and check examples/), fuzz.sh,
//	              slurm-local.sh (a private single-node Slurm), slurm-test.sh
package hpc
