// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/mpi"
)

func TestFormatEnv(t *testing.T) {
	slurm := map[string]string{
		"SLURM_JOB_ID": "812", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "4",
		"SLURM_LOCALID": "1", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_NUM_NODES": "2",
		"SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NODEID": "0", "SLURM_CPUS_PER_TASK": "1",
		"SLURM_TMPDIR": "/scratch", "PMIX_RANK": "1",
	}
	tests := []struct {
		name string
		info envInfo
		want []string
		not  []string
	}{
		{
			name: "srun",
			info: envInfo{
				Env:  hpc.DetectFrom(func(k string) string { return slurm[k] }),
				Rank: 1, Size: 4, Level: mpi.ThreadMultiple, Library: "Open MPI v4.1.4",
				GoMaxProcs: 2, NumCPU: 2, PID: 42,
			},
			want: []string{
				"rank 1 of 4 (host ", "pid 42)\n",
				"  launcher    srun rank 1/4",
				"  mpi         rank 1 of 4, MPI_THREAD_MULTIPLE\n",
				"  library     Open MPI v4.1.4\n",
				"  slurm       job 812 step 0 nodes n[1-2]\n",
				"tasks per node [2 2], cpus per task 1",
				"  scratch     /scratch\n",
				"  GOMAXPROCS  2 (NumCPU 2)\n",
			},
			not: []string{"WARNING", "note:"},
		},
		{
			name: "a share of the node's CPUs",
			info: envInfo{
				Env:  hpc.DetectFrom(func(string) string { return "" }),
				Rank: 0, Size: 1, Level: mpi.ThreadSerialized, GoMaxProcs: 1, NumCPU: 8,
			},
			want: []string{
				"  launcher    singleton", "MPI_THREAD_SERIALIZED", "  library     ?\n",
				"  slurm       none (not in a Slurm job)\n", "  pmi         none\n",
				"note: fewer Go processors than CPUs",
			},
			not: []string{"WARNING"},
		},
		{
			name: "launch mismatch",
			info: envInfo{
				Env:  hpc.DetectFrom(func(k string) string { return map[string]string{"PMI_SIZE": "2", "PMI_RANK": "1"}[k] }),
				Rank: 0, Size: 1, Warning: "group: Init: rank 0 of 1: hpc: mpirun started 2 ranks but MPI sees a world of 1",
			},
			want: []string{"  WARNING: group: Init: rank 0 of 1: hpc: mpirun started 2 ranks"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := formatEnv(tt.info)
			for _, s := range tt.want {
				assert.Contains(t, got, s)
			}
			for _, s := range tt.not {
				assert.NotContains(t, got, s)
			}
		})
	}
}

func TestEnvMpirun(t *testing.T) {
	mpirun := needMpirun(t)
	bin := buildTdmpi(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "-np", "2", "--oversubscribe", "--bind-to", "none", "--timeout", "100", bin, "env")
	cmd.Env = mpirunEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	out := stdout.String()
	// One block per rank, in rank order, printed by rank 0 only.
	heads := regexp.MustCompile(`(?m)^rank (\d) of (\d) \(host .*, pid \d+\)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, heads, 2, out)
	assert.Equal(t, []string{"0", "2"}, heads[0][1:])
	assert.Equal(t, []string{"1", "2"}, heads[1][1:])
	assert.Contains(t, out, "  launcher    mpirun rank 0/2")
	assert.Contains(t, out, "  launcher    mpirun rank 1/2")
	assert.Equal(t, 2, strings.Count(out, "MPI_THREAD_MULTIPLE"))
	assert.NotContains(t, out, "WARNING")
	assert.Contains(t, out, "GOMAXPROCS")
}

// TestEnvLaunchMismatch runs env as a singleton in an environment that
// claims a launcher started two ranks (MPICH's variables, which Open MPI
// ignores): the rank must print its block with the warning and fail.
func TestEnvLaunchMismatch(t *testing.T) {
	needMpirun(t) // MPI must be installed for a singleton to start
	bin := buildTdmpi(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "env")
	cmd.Env = append(mpirunEnv(), "PMI_SIZE=2", "PMI_RANK=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", stderr.String())
	assert.Equal(t, exitFailure, ee.ExitCode())
	assert.Contains(t, stdout.String(), "rank 0 of 1")
	assert.Contains(t, stdout.String(), "  launcher    mpirun rank 1/2")
	assert.Contains(t, stdout.String(), "WARNING: ")
	assert.Contains(t, stdout.String(), "started 2 ranks but MPI sees a world of 1")
	assert.Contains(t, stderr.String(), "tdmpi env: launcher and MPI disagree")
}
