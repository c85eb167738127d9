// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import "fmt"

// LaunchError reports ranks that were started as a group by a launcher but
// each initialized MPI alone, as a singleton. The usual cause is a PMI
// mismatch: srun --mpi=none (or a plugin the MPI library lacks) for srun,
// or a program linked against another MPI library than the mpirun that
// started it.
type LaunchError struct {
	Env     Env // the environment that promised Env.Size ranks
	MPISize int // the world size MPI reports
}

// Error describes the mismatch and how to launch correctly.
func (e *LaunchError) Error() string {
	var hint string
	switch e.Env.Launcher {
	case Srun:
		pmi := e.Env.PMI
		if pmi == "" {
			pmi = "none"
		}
		hint = fmt.Sprintf("srun's PMI does not match the MPI library (PMI variables: %s): launch with srun --mpi=pmix", pmi)
	case Mpirun:
		hint = "the program's MPI library is not the one of the mpirun that started it"
	default:
		hint = "the launcher's PMI does not match the MPI library"
	}
	return fmt.Sprintf("hpc: %s started %d ranks but MPI sees a world of %d, so every rank runs alone: %s",
		e.Env.Launcher, e.Env.Size, e.MPISize, hint)
}

// CheckSize compares the world size MPI reports with the size the launcher
// promised. It returns a *LaunchError when the launcher started more than
// one rank and MPI sees a world of one: the ranks started as singletons and
// would each compute alone. Other differences (heterogeneous Slurm jobs, for
// example, span several steps) are not errors.
func (e Env) CheckSize(mpiSize int) error {
	if e.Size > 1 && mpiSize == 1 {
		return &LaunchError{Env: e, MPISize: mpiSize}
	}
	return nil
}
