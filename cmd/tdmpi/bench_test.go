// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSizeSeries(t *testing.T) {
	tests := []struct {
		lo, hi, f int64
		want      []int64
	}{
		{8, 8, 2, []int64{8}},
		{8, 64, 2, []int64{8, 16, 32, 64}},
		{8, 100, 2, []int64{8, 16, 32, 64, 100}},
		{1, 1 << 10, 4, []int64{1, 4, 16, 64, 256, 1024}},
		{3, 10, 10, []int64{3, 10}},
		{1 << 62, 1<<63 - 1, 2, []int64{1 << 62, 1<<63 - 1}}, // no overflow
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sizeSeries(tt.lo, tt.hi, tt.f), "sizeSeries(%d, %d, %d)", tt.lo, tt.hi, tt.f)
	}
	s := sizeSeries(8, 256<<20, 2)
	assert.Len(t, s, 26)
}

// TestBenchFlags checks the flags that are refused before MPI starts: the
// test runs them in process, and must never reach MPI.
func TestBenchFlags(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"-min", "0"}, "-min 0B: want 1 byte or more"},
		{[]string{"-min", "1MiB", "-max", "1KiB"}, "-max 1KiB is smaller than -min 1MiB"},
		{[]string{"-max", "5GiB"}, "-max 5GiB: want at most 4 GiB"},
		{[]string{"-factor", "1"}, "-factor 1: want 2 or more"},
		{[]string{"-leaves", "0"}, "-leaves 0: want 1 to 1048576"},
		{[]string{"-leaves", "2000000"}, "-leaves 2000000: want 1 to 1048576"},
		{[]string{"-leaves", "65536"}, "-leaves 65536: send-leaves sends a message per leaf"},
		{[]string{"-leaves", "65536", "-methods", "send-leaves"}, "leave it out of -methods"},
		{[]string{"-iters", "0"}, "-iters 0: want 1 or more"},
		{[]string{"-time", "-1s"}, "-time -1s: want 0 or more"},
		{[]string{"-methods", "raw-p2p,warp"}, `-methods: unknown method "warp"`},
		{[]string{"-max", "lots"}, `invalid value "lots" for flag -max`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runTdmpi(append([]string{"bench"}, tt.args...)...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tt.stderr)
		})
	}
}

func TestBenchConfigCheck(t *testing.T) {
	c := defaultBenchConfig()
	require.NoError(t, c.check())
	assert.Len(t, c.sizes, 26)
	assert.Equal(t, int64(8), c.sizes[0])
	assert.Equal(t, int64(256<<20), c.sizes[25])
	assert.Len(t, c.ms, len(methods))
}

func TestSelectMethods(t *testing.T) {
	tests := []struct {
		list string
		want []string
	}{
		{"", []string{"raw-p2p", "raw-bcast", "raw-allreduce", "raw-p2p-hp", "initremote", "initremote-bc", "initremote-re", "initremote-set", "broadcast", "broadcast-one", "send-consol", "send-leaves", "allreduce", "allreduce-cons"}},
		{"all", []string{"raw-p2p", "raw-bcast", "raw-allreduce", "raw-p2p-hp", "initremote", "initremote-bc", "initremote-re", "initremote-set", "broadcast", "broadcast-one", "send-consol", "send-leaves", "allreduce", "allreduce-cons"}},
		{"initremote", []string{"raw-p2p", "initremote"}},
		{"send-leaves, initremote-bc", []string{"raw-p2p", "raw-bcast", "initremote-bc", "send-leaves"}},
		{"raw-bcast", []string{"raw-bcast"}},
		{"raw-p2p-hp", []string{"raw-p2p", "raw-p2p-hp"}},
		{"allreduce", []string{"raw-allreduce", "allreduce"}},
	}
	for _, tt := range tests {
		ms, err := selectMethods(tt.list)
		require.NoError(t, err)
		var got []string
		for _, m := range ms {
			got = append(got, m.name)
		}
		assert.Equal(t, tt.want, got, "selectMethods(%q)", tt.list)
	}
	_, err := selectMethods("initremote,nope")
	assert.ErrorContains(t, err, `unknown method "nope"`)
}

func TestMethodsBaselines(t *testing.T) {
	byName := map[string]*method{}
	for _, m := range methods {
		byName[m.name] = m
	}
	for _, m := range methods {
		if m.baseline == "" {
			continue
		}
		b, ok := byName[m.baseline]
		require.True(t, ok, "%s: baseline %s is a method", m.name, m.baseline)
		assert.Empty(t, b.baseline, "%s: a baseline has no baseline", b.name)
		assert.Equal(t, m.pattern, b.pattern, "%s: same pattern as its baseline", m.name)
	}
	for _, m := range methods {
		assert.Equal(t, !strings.HasPrefix(m.name, "raw-"), m.td, "%s moves TensorDicts", m.name)
	}
}

func TestBenchTD(t *testing.T) {
	tests := []struct {
		size         int64
		leaves, want int
	}{
		{8, 16, 8},
		{1, 16, 1},
		{100, 16, 16},
		{1 << 20, 3, 3},
	}
	for _, tt := range tests {
		td, err := benchTD(tt.size, tt.leaves)
		require.NoError(t, err)
		assert.True(t, td.IsConsolidated())
		var total int64
		n := 0
		for _, it := range td.Items() {
			if it.TD == nil {
				continue
			}
			for _, leaf := range it.TD.Items() {
				total += int64(leaf.Tensor.NBytes())
				n++
			}
		}
		assert.Equal(t, tt.size, total, "size %d leaves %d: payload", tt.size, tt.leaves)
		assert.Equal(t, tt.want, n, "size %d leaves %d: leaf count", tt.size, tt.leaves)
		assert.Equal(t, tt.want, leafCount(tt.size, tt.leaves))
		require.NoError(t, td.Release())
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 1000, 2, 3, 2}, 2}, // an outlier does not move it
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		assert.Equal(t, tt.want, median(tt.in), "median(%v)", tt.in)
		assert.Equal(t, in, tt.in, "median leaves its input alone")
	}
	assert.Equal(t, 1.0, minOf([]float64{3, 1, 2}))
	assert.Equal(t, 0.0, minOf(nil))
}

func TestBatchSteps(t *testing.T) {
	tests := []struct {
		one, target time.Duration
		want        int
	}{
		{time.Microsecond, 2 * time.Millisecond, 2000},
		{time.Second, 2 * time.Millisecond, 1},
		{0, time.Millisecond, 1 << 16},
		{time.Nanosecond, time.Second, 1 << 16},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, batchSteps(tt.one, tt.target), "batchSteps(%v, %v)", tt.one, tt.target)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		s    float64
		want string
	}{
		{712e-9, "712 ns"},
		{1.25e-6, "1.25 us"},
		{12.34e-6, "12.3 us"},
		{61.26e-3, "61.3 ms"},
		{2.5, "2.50 s"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatDuration(tt.s), "formatDuration(%g)", tt.s)
	}
}

// sampleResults returns results of two sizes, with ratios set.
func sampleResults() []result {
	rs := []result{
		{Size: 8, Method: "raw-p2p", Pattern: patternP2P, Reps: 10, Batch: 100, Median: 1e-6, Min: 0.8e-6},
		{Size: 8, Method: "initremote", Pattern: patternP2P, Baseline: "raw-p2p", Leaves: 8, Reps: 10, Batch: 50, Median: 5e-6, Min: 4e-6},
		{Size: 1 << 20, Method: "raw-p2p", Pattern: patternP2P, Reps: 5, Batch: 1, Median: 200e-6, Min: 190e-6},
		{Size: 1 << 20, Method: "initremote", Pattern: patternP2P, Baseline: "raw-p2p", Leaves: 16, Reps: 5, Batch: 1, Median: 300e-6, Min: 250e-6},
		{Size: 1 << 20, Method: "send-leaves", Pattern: patternP2P, Baseline: "missing", Leaves: 16, Reps: 5, Batch: 1, Median: 300e-6, Min: 250e-6},
	}
	setRatios(rs)
	return rs
}

func TestReport(t *testing.T) {
	rs := sampleResults()
	assert.Equal(t, 1.0, rs[0].Ratio)
	assert.InDelta(t, 5.0, rs[1].Ratio, 1e-12)
	assert.InDelta(t, 1.5, rs[3].Ratio, 1e-12)
	assert.Equal(t, 0.0, rs[4].Ratio, "no baseline measured")
	assert.InDelta(t, float64(1<<20)/200e-6/1e9, rs[2].Bandwidth(), 1e-9)

	var table bytes.Buffer
	require.NoError(t, writeTable(&table, rs))
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	require.Len(t, lines, 6)
	assert.Regexp(t, `^size\s+method\s+leaves\s+one-way\s+GB/s\s+vs raw\s+baseline\s+best$`, lines[0])
	assert.Regexp(t, `^8 B\s+raw-p2p\s+1.00 us\s+0.008\s+1.00x\s+800 ns$`, lines[1])
	assert.Regexp(t, `^\s+initremote\s+8\s+5.00 us\s+0.002\s+5.00x\s+raw-p2p\s+4.00 us$`, lines[2])
	assert.Regexp(t, `^\s+initremote\s+16\s+300 us\s+3.495\s+1.50x\s+raw-p2p`, lines[4])
	assert.Regexp(t, `send-leaves .* -\s+missing`, lines[5])

	var b bytes.Buffer
	require.NoError(t, writeCSV(&b, rs))
	recs, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, len(rs)+1)
	assert.Equal(t, csvHeader, recs[0])
	assert.Equal(t, []string{"8", "initremote", "p2p", "raw-p2p", "8", "10", "50", "5e-06", "4e-06", "0.0016", "5"}, recs[2])
}

// TestBenchMpirun runs a short bench under mpirun -np 2 and checks its
// table and CSV file.
func TestBenchMpirun(t *testing.T) {
	mpirun := needMpirun(t)
	bin := buildTdmpi(t)
	out := filepath.Join(t.TempDir(), "b")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "-np", "2", "--bind-to", "none", "--timeout", "120",
		bin, "bench", "-max", "64KiB", "-time", "50ms", "-out", out)
	cmd.Env = mpirunEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())

	// 14 sizes (8 B to 64 KiB) times every method, ratios on every row.
	rows := 14 * len(methods)
	table := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, table, rows+1, stdout.String())
	ratio := regexp.MustCompile(`\s\d+\.\d\dx\s`)
	for _, line := range table[1:] {
		assert.Regexp(t, ratio, line)
	}
	assert.Regexp(t, `(?m)^64 KiB\s+raw-p2p\s+\S+ [mun]?s\s+.*1\.00x`, stdout.String())
	assert.Regexp(t, `(?m)^\s+raw-p2p-hp\s+\S+ [mun]?s\s+`, stdout.String(), "no leaf count for raw methods")
	assert.Regexp(t, `(?m)^\s+initremote\s+16\s+\S+ [mun]?s\s+\d+\.\d+\s+\d+\.\d+x\s+raw-p2p`, stdout.String())
	assert.Contains(t, stderr.String(), fmt.Sprintf("bench: [%3d/%d ", rows, rows))
	assert.Contains(t, stderr.String(), "bench: wrote "+out+".csv\n")

	f, err := os.Open(out + ".csv")
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, rows+1)
	assert.Equal(t, csvHeader, recs[0])
	for _, rec := range recs[1:] {
		size, err := strconv.ParseInt(rec[0], 10, 64)
		require.NoError(t, err)
		assert.True(t, size >= 8 && size <= 64<<10)
		for _, col := range []int{7, 8, 9, 10} {
			v, err := strconv.ParseFloat(rec[col], 64)
			require.NoError(t, err, "column %s of %v", csvHeader[col], rec)
			assert.Greater(t, v, 0.0, "column %s of %v", csvHeader[col], rec)
		}
	}
}
