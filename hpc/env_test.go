// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeSys struct {
	host   string
	shm    bool
	tmpdir string
}

func (f fakeSys) hostname() (string, error) {
	if f.host == "" {
		return "", errors.New("no host name")
	}
	return f.host, nil
}
func (f fakeSys) isDir(p string) bool { return f.shm && p == "/dev/shm" }
func (f fakeSys) tempDir() string     { return f.tmpdir }

func lookup(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestDetect(t *testing.T) {
	t.Parallel()
	sys := fakeSys{host: "n1", shm: true, tmpdir: "/tmp"}
	for _, test := range []struct {
		name string
		vars map[string]string
		want Env
	}{
		{
			name: "singleton",
			vars: nil,
			want: Env{Launcher: Singleton, Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1,
				NodeID: -1, Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "open mpi mpirun",
			vars: map[string]string{
				"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3",
				"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
				"PMIX_RANK": "3", "PMIX_NAMESPACE": "prterun-vm-1@1",
				"TMPDIR": "/scratch/me",
			},
			want: Env{Launcher: Mpirun, PMI: "pmix", Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2,
				NodeID: -1, Host: "n1", Scratch: "/scratch/me"},
		},
		{
			name: "mpich hydra",
			vars: map[string]string{
				"PMI_RANK": "1", "PMI_SIZE": "2", "PMI_FD": "5",
				"MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
			},
			want: Env{Launcher: Mpirun, PMI: "pmi", Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2,
				NodeID: -1, Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "srun pmix",
			vars: map[string]string{
				"SLURM_JOB_ID": "812", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5",
				"SLURM_LOCALID": "1", "SLURM_NODEID": "2", "SLURM_NTASKS": "6",
				"SLURM_STEP_NUM_TASKS": "6", "SLURM_STEP_NODELIST": "n[1-3]",
				"SLURM_JOB_NODELIST": "n[1-4]", "SLURM_STEP_NUM_NODES": "3",
				"SLURM_STEP_TASKS_PER_NODE": "2(x3)", "SLURM_TASKS_PER_NODE": "2(x4)",
				"SLURM_CPUS_PER_TASK": "4", "PMIX_RANK": "5", "SLURM_TMPDIR": "/local/812",
				"TMPDIR": "/tmp/other",
			},
			want: Env{Launcher: Srun, PMI: "pmix", Rank: 5, Size: 6, LocalRank: 1, LocalSize: 2,
				NodeID: 2, JobID: "812", StepID: "0", NodeList: "n[1-3]", NumNodes: 3,
				TasksPerNode: []int{2, 2, 2}, CPUsPerTask: 4, Host: "n1", Scratch: "/local/812"},
		},
		{
			name: "srun pmi2 uneven nodes",
			vars: map[string]string{
				"SLURM_JOBID": "9", "SLURM_STEPID": "3", "SLURM_PROCID": "4",
				"SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NTASKS": "5",
				"SLURM_NODELIST": "a,b", "SLURM_NNODES": "2",
				"SLURM_TASKS_PER_NODE": "4,1", "PMI_FD": "7", "PMI_RANK": "4", "PMI_SIZE": "5",
			},
			want: Env{Launcher: Srun, PMI: "pmi", Rank: 4, Size: 5, LocalRank: 0, LocalSize: 1,
				NodeID: 1, JobID: "9", StepID: "3", NodeList: "a,b", NumNodes: 2,
				TasksPerNode: []int{4, 1}, Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "srun without pmi",
			vars: map[string]string{
				"SLURM_JOB_ID": "10", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1",
				"SLURM_NTASKS": "2", "SLURM_LOCALID": "1", "SLURM_NODEID": "0",
				"SLURM_TASKS_PER_NODE": "2",
			},
			want: Env{Launcher: Srun, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2,
				NodeID: 0, JobID: "10", StepID: "0", TasksPerNode: []int{2},
				Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "mpirun inside sbatch",
			vars: map[string]string{
				"SLURM_JOB_ID": "11", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0",
				"SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "vm", "SLURM_TASKS_PER_NODE": "4",
				"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2",
				"OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
			},
			want: Env{Launcher: Mpirun, Rank: 2, Size: 4, LocalRank: 2, LocalSize: 4,
				NodeID: -1, JobID: "11", StepID: "0", NodeList: "vm", TasksPerNode: []int{4},
				Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "sbatch script",
			vars: map[string]string{
				"SLURM_JOB_ID": "12", "SLURM_NTASKS": "2", "SLURM_PROCID": "0",
				"SLURM_JOB_NODELIST": "vm", "SLURM_JOB_NUM_NODES": "1",
				"SLURM_TASKS_PER_NODE": "2", "SLURM_NODEID": "0",
			},
			want: Env{Launcher: SlurmBatch, Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1,
				NodeID: 0, JobID: "12", NodeList: "vm", NumNodes: 1, TasksPerNode: []int{2},
				Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "batch step id",
			vars: map[string]string{"SLURM_JOB_ID": "13", "SLURM_STEP_ID": slurmBatchStep},
			want: Env{Launcher: SlurmBatch, Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1,
				NodeID: -1, JobID: "13", Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "malformed numbers",
			vars: map[string]string{
				"OMPI_COMM_WORLD_SIZE": "two", "OMPI_COMM_WORLD_RANK": "-3",
			},
			want: Env{Launcher: Mpirun, Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1,
				NodeID: -1, Host: "n1", Scratch: "/dev/shm"},
		},
		{
			name: "other pmix launcher",
			vars: map[string]string{"PMIX_RANK": "1", "PMIX_NAMESPACE": "ns"},
			want: Env{Launcher: Mpirun, PMI: "pmix", Rank: 1, Size: -1, LocalRank: -1, LocalSize: -1,
				NodeID: -1, Host: "n1", Scratch: "/dev/shm"},
		},
	} {
		t.Run(test.name, func(t *testing.T) {
			got := detect(lookup(test.vars), sys)
			assert.Equal(t, test.want, got)
		})
	}
}

func TestDetectHostAndScratchFallbacks(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"SLURMD_NODENAME": "node7", "HOSTNAME": "h"}
	e := detect(lookup(vars), fakeSys{tmpdir: "/var/tmp"})
	assert.Equal(t, "node7", e.Host)
	assert.Equal(t, "/var/tmp", e.Scratch)

	e = detect(lookup(map[string]string{"HOSTNAME": "h"}), fakeSys{tmpdir: "/tmp"})
	assert.Equal(t, "h", e.Host)
}

func TestDetectRealProcess(t *testing.T) {
	e := Detect()
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, host, e.Host)
	assert.NotEmpty(t, e.Scratch)
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		assert.Equal(t, Mpirun, e.Launcher)
		assert.Positive(t, e.Size)
		assert.GreaterOrEqual(t, e.Rank, 0)
		assert.Less(t, e.Rank, e.Size)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"1", []int{1}},
		{"2(x3),1", []int{2, 2, 2, 1}},
		{"4,1(x2),3", []int{4, 1, 1, 3}},
		{" 2(x2) ", []int{2, 2}},
		{"2(x0)", nil},
		{"2(3)", nil},
		{"2(x3", nil},
		{"a", nil},
		{"-1", nil},
		{"1,,2", nil},
		{"1(x1048577)", nil},
		{"1(x99999999999999999999)", nil},
	} {
		assert.Equal(t, test.want, ParseTasksPerNode(test.in), "input %q", test.in)
	}
}

func TestCheckSize(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		name    string
		env     Env
		mpiSize int
		wantErr string
	}{
		{"singleton", Env{Launcher: Singleton, Rank: 0, Size: 1}, 1, ""},
		{"mpirun ok", Env{Launcher: Mpirun, Size: 2}, 2, ""},
		{"mpirun wrong library", Env{Launcher: Mpirun, Size: 2}, 1, "mpirun started 2 ranks but MPI sees a world of 1"},
		{"srun ok", Env{Launcher: Srun, PMI: "pmix", Size: 4}, 4, ""},
		{"srun no pmi", Env{Launcher: Srun, Size: 2}, 1, "PMI variables: none): launch with srun --mpi=pmix"},
		{"srun wrong pmi", Env{Launcher: Srun, PMI: "pmi", Size: 3}, 1, "PMI variables: pmi)"},
		{"batch script", Env{Launcher: SlurmBatch, Size: -1}, 1, ""},
		{"unknown size", Env{Launcher: Mpirun, Size: -1}, 1, ""},
		{"larger world", Env{Launcher: Srun, Size: 2}, 4, ""},
	} {
		err := test.env.CheckSize(test.mpiSize)
		if test.wantErr == "" {
			assert.NoError(t, err, test.name)
			continue
		}
		require.Error(t, err, test.name)
		assert.Contains(t, err.Error(), test.wantErr, test.name)
		assert.True(t, strings.HasPrefix(err.Error(), "hpc: "), test.name)
		var le *LaunchError
		require.ErrorAs(t, err, &le, test.name)
		assert.Equal(t, test.mpiSize, le.MPISize)
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		env  Env
		want string
	}{
		{Env{Launcher: Singleton, Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1, Host: "vm", Scratch: "/dev/shm"},
			"singleton rank 0/1 local 0/1 host vm scratch /dev/shm"},
		{Env{Launcher: Srun, PMI: "pmix", Rank: 1, Size: 4, LocalRank: 1, LocalSize: 2, JobID: "812",
			StepID: "0", NodeList: "n[1-2]", Host: "n1", Scratch: "/tmp"},
			"srun rank 1/4 local 1/2 job 812 step 0 nodes n[1-2] host n1 pmi pmix scratch /tmp"},
		{Env{Launcher: SlurmBatch, Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1, JobID: "7"},
			"slurm-batch job 7"},
		{Env{Launcher: Mpirun, Rank: 2, Size: -1, LocalRank: -1, LocalSize: -1},
			"mpirun rank 2/?"},
	} {
		assert.Equal(t, test.want, test.env.String())
	}
	assert.Equal(t, "Launcher(9)", Launcher(9).String())
}
