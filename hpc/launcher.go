// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import "strconv"

// Launcher is the program that started the process.
type Launcher int

const (
	// Singleton is a process started without a launcher: MPI will run it
	// as rank 0 of a world of size 1.
	Singleton Launcher = iota
	// Mpirun is a rank started by mpirun or mpiexec (Open MPI or MPICH
	// Hydra), inside or outside a Slurm allocation.
	Mpirun
	// Srun is a task of a Slurm job step, started by srun.
	Srun
	// SlurmBatch is a process inside a Slurm allocation but outside any
	// job step: the batch script of sbatch, or a shell of salloc.
	SlurmBatch
)

// String returns "singleton", "mpirun", "srun" or "slurm-batch".
func (l Launcher) String() string {
	switch l {
	case Singleton:
		return "singleton"
	case Mpirun:
		return "mpirun"
	case Srun:
		return "srun"
	case SlurmBatch:
		return "slurm-batch"
	}
	return "Launcher(" + strconv.Itoa(int(l)) + ")"
}
