// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/hpc"
)

// The environment of rank 1 of a 4-task srun step on two nodes.
func ExampleDetectFrom() {
	vars := map[string]string{
		"SLURM_JOB_ID":              "812",
		"SLURM_STEP_ID":             "0",
		"SLURM_PROCID":              "1",
		"SLURM_LOCALID":             "1",
		"SLURM_NODEID":              "0",
		"SLURM_STEP_NUM_TASKS":      "4",
		"SLURM_STEP_NODELIST":       "n[1-2]",
		"SLURM_STEP_TASKS_PER_NODE": "2(x2)",
		"PMIX_RANK":                 "1",
	}
	env := hpc.DetectFrom(func(k string) string { return vars[k] })
	fmt.Println(env.Launcher, env.PMI, env.Rank, env.Size, env.LocalRank, env.LocalSize)
	fmt.Println(env.JobID, env.StepID, env.NodeList, env.TasksPerNode)

	// Had srun started the tasks without PMI, MPI would see 1 rank in each.
	fmt.Println(env.CheckSize(4) == nil, env.CheckSize(1) != nil)
	// Output:
	// srun pmix 1 4 1 2
	// 812 0 n[1-2] [2 2]
	// true true
}

func ExampleEnv_CheckSize() {
	env := hpc.DetectFrom(func(k string) string {
		return map[string]string{
			"SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "2",
		}[k]
	})
	fmt.Println(env.CheckSize(1))
	// Output:
	// hpc: srun started 2 ranks but MPI sees a world of 1, so every rank runs alone: srun's PMI does not match the MPI library (PMI variables: none): launch with srun --mpi=pmix
}
