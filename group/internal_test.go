// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/internal/proto"
)

// These tests need no MPI: they check the decisions made before any MPI call.

func TestLaunchError(t *testing.T) {
	fake := func(vars map[string]string) hpc.Env {
		return hpc.DetectFrom(func(k string) string { return vars[k] })
	}
	for _, test := range []struct {
		name    string
		env     hpc.Env
		size    int
		wantErr string
	}{
		{"singleton", fake(nil), 1, ""},
		{"mpirun 2 sees 2", fake(map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}), 2, ""},
		{"mpirun 2 sees 1", fake(map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}), 1,
			"group: Init: rank 0 of 1: hpc: mpirun started 2 ranks but MPI sees a world of 1"},
		{"srun 2 no pmi", fake(map[string]string{"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2", "SLURM_PROCID": "1"}), 1,
			"launch with srun --mpi=pmix"},
		{"srun 4 pmix sees 4", fake(map[string]string{"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "PMIX_RANK": "0"}), 4, ""},
		{"sbatch script ntasks 2", fake(map[string]string{"SLURM_JOB_ID": "5", "SLURM_NTASKS": "2"}), 1, ""},
	} {
		err := launchError(test.env, 0, test.size)
		if test.wantErr == "" {
			assert.NoError(t, err, test.name)
			continue
		}
		require.Error(t, err, test.name)
		assert.Contains(t, err.Error(), test.wantErr, test.name)
		var le *hpc.LaunchError
		assert.True(t, errors.As(err, &le), test.name)
	}
}

func TestCheckRanks(t *testing.T) {
	g := &Group{rank: 1, size: 4}
	for _, test := range []struct {
		ranks   []int
		wantErr string
	}{
		{[]int{1}, ""},
		{[]int{3, 1, 0}, ""},
		{[]int{0, 1, 2, 3}, ""},
		{nil, "group: New: rank 1 of 4: empty rank list"},
		{[]int{1, 4}, "group: New: rank 1 of 4: ranks[1] = 4 is out of range [0,4)"},
		{[]int{-1, 1}, "ranks[0] = -1 is out of range [0,4)"},
		{[]int{1, 2, 1}, "ranks[2] = 1 repeats ranks[0]"},
		{[]int{0, 2}, "ranks [0 2] do not hold the caller's rank 1"},
	} {
		err := g.checkRanks(test.ranks)
		if test.wantErr == "" {
			assert.NoError(t, err, "ranks %v", test.ranks)
			continue
		}
		require.Error(t, err, "ranks %v", test.ranks)
		assert.Contains(t, err.Error(), test.wantErr)
	}
	assert.ErrorIs(t, g.checkRanks([]int{0}), ErrNotMember)
}

func TestCreateTag(t *testing.T) {
	seen := map[int]bool{}
	for _, ranks := range [][]int{{0}, {1}, {0, 1}, {1, 0}, {0, 2}, {0, 1, 2, 3}} {
		tag := createTag(ranks)
		assert.GreaterOrEqual(t, tag, createTagBase)
		assert.Less(t, tag, createTagBase+createTagCount)
		assert.LessOrEqual(t, tag, 32767, "MPI guarantees tags up to 32767 only")
		assert.Equal(t, tag, createTag(ranks), "deterministic")
		seen[tag] = true
	}
	assert.Greater(t, len(seen), 3, "different lists mostly get different tags")
}

func TestExclusiveAndLock(t *testing.T) {
	g := &Group{}
	inside := 0
	maxInside := 0
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				_ = proto.Exclusive(g, func() error {
					inside++
					maxInside = max(maxInside, inside)
					inside--
					return nil
				})
				proto.Lock(g)
				inside++
				maxInside = max(maxInside, inside)
				inside--
				proto.Unlock(g)
			}
		}()
	}
	for range 8 {
		<-done
	}
	assert.Equal(t, 1, maxInside)
	want := errors.New("from f")
	assert.Same(t, want, proto.Exclusive(g, func() error { return want }))
}

// TestPayloadTag checks the payload range of a communicator with MPI's
// portable tag bound: above the header tags, below New's tags, cycling.
func TestPayloadTag(t *testing.T) {
	g := &Group{}
	g.initPayloadTags()
	first := proto.PayloadTag(g)
	assert.Equal(t, proto.HeaderTag+proto.HeaderTags, first)
	seen := map[int]bool{first: true}
	for range smallPayloadEnd - smallPayloadBase - 1 {
		tag := proto.PayloadTag(g)
		assert.GreaterOrEqual(t, tag, proto.HeaderTag+proto.HeaderTags)
		assert.Less(t, tag, createTagBase)
		seen[tag] = true
	}
	assert.Len(t, seen, smallPayloadEnd-smallPayloadBase, "every tag of the range once")
	assert.Equal(t, first, proto.PayloadTag(g), "the range cycles")
}

// fairShare shares each CPU of a rank's mask out among the ranks that
// may run on it, and procsShare keeps GOMAXPROCS between 1 and its value.
func TestProcsShare(t *testing.T) {
	cpus := func(list ...int) []uint64 {
		m := make([]uint64, 2)
		for _, c := range list {
			m[c/64] |= 1 << (c % 64)
		}
		return m
	}
	span := func(lo, hi int) []uint64 { // CPUs lo to hi-1
		var l []int
		for c := lo; c < hi; c++ {
			l = append(l, c)
		}
		return cpus(l...)
	}
	rep := func(m []uint64, n int) [][]uint64 {
		ms := make([][]uint64, n)
		for i := range ms {
			ms[i] = m
		}
		return ms
	}
	for _, tc := range []struct {
		name  string
		masks [][]uint64
		me    int
		cur   int
		want  int
	}{
		{"two unbound ranks on 2 CPUs", rep(span(0, 2), 2), 1, 2, 1},
		{"four unbound ranks on 2 CPUs", rep(span(0, 2), 4), 0, 2, 1},
		{"two unbound ranks on 64 CPUs", rep(span(0, 64), 2), 0, 64, 32},
		{"three unbound ranks on 8 CPUs", rep(span(0, 8), 3), 2, 8, 2},
		{"alone on the node", rep(span(0, 8), 1), 0, 8, 8},
		{"bound to a core each", [][]uint64{cpus(0), cpus(1)}, 1, 1, 1},
		{"bound to 4 of 16 CPUs each", [][]uint64{span(0, 4), span(4, 8), span(8, 12), span(12, 16)}, 2, 4, 4},
		{"four ranks a socket of 16 CPUs", append(rep(span(0, 16), 4), rep(span(16, 32), 4)...), 5, 16, 4},
		{"CPUs past 64", append(rep(span(64, 128), 2), rep(span(0, 64), 2)...), 0, 64, 32},
		{"overlapping masks, the middle one", [][]uint64{span(0, 4), span(2, 6), span(4, 8)}, 1, 4, 2},
		{"overlapping masks, an end one", [][]uint64{span(0, 4), span(2, 6), span(4, 8)}, 0, 4, 3},
		{"already lower (a CPU quota)", rep(span(0, 64), 2), 0, 3, 3},
		{"own mask unknown", [][]uint64{cpus(), span(0, 8)}, 0, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, procsShare(tc.cur, fairShare(tc.masks, tc.me)))
		})
	}
}

// assumedMasks (ranks with torch peers, which exchange no masks) counts
// the job's local ranks as sharing this rank's CPUs when it may run on
// every online CPU, and as bound elsewhere otherwise.
func TestAssumedMasks(t *testing.T) {
	online, err := hpc.OnlineCPUs()
	require.NoError(t, err)
	masks, err := assumedMasks(3)
	require.NoError(t, err)
	require.NotEmpty(t, masks)
	assert.Equal(t, runtime.NumCPU(), cpuCount(masks[0]), "this rank's mask first")
	if runtime.NumCPU() == online {
		assert.Len(t, masks, 3, "unbound: three ranks on every CPU")
	} else {
		assert.Len(t, masks, 1, "bound: only its own CPUs")
	}
	masks, err = assumedMasks(-1) // the local size unknown
	require.NoError(t, err)
	assert.Len(t, masks, 1)
}
