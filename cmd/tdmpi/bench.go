// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/bytesize"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensordict"
)

// maxBenchSize bounds -max: every rank holds several buffers of this size.
const maxBenchSize = 4 << 30

var benchCmd = &command{
	name:  "bench",
	args:  "[flags]",
	short: "measure tdmpi's transfers beside raw MPI (under mpirun -np 2)",
	long: `
Bench measures, in one run, for payloads from -min to -max bytes (each size
-factor times the one before, and -max), the one-way time of these methods:

	raw-p2p        mpi.Send and mpi.Recv of a []byte in 4 KiB pages, ping-pong
	               (p2p baseline)
	raw-bcast      mpi.Bcast of a []byte in 4 KiB pages, the root alternating
	               (bcast baseline)
	raw-p2p-hp     raw-p2p on off-heap huge-page memory (tensor.NewOffHeapStorage):
	               the ceiling; tdmpi's storages from 4 MiB up, consolidated
	               or received, are huge pages too (its receive pool's regions)
	initremote     InitRemote and FromRemoteInit, ping-pong, each result
	               released (TensorDict.Release) before the next receive
	initremote-bc  InitRemote and FromRemoteInit with WithBroadcast, the
	               source alternating
	initremote-re  initremote with WithAllocator handing each receive the
	               storage of the previous result (no fresh memory)
	initremote-set InitRemote of TensorDicts whose leaves were set one by one
	               (a storage each, never consolidated), ping-pong, each
	               result dropped, not released
	broadcast      Broadcast (the collective), the source alternating, each
	               result released once broadcast on
	broadcast-one  Broadcast from rank 0 every time (a learner sending its
	               weights), each result released
	send-consol    Send and Recv with WithConsolidated, ping-pong
	send-leaves    Send and Recv, one message per leaf, ping-pong
	raw-allreduce  mpi.AllreduceInPlace (sum) of a []byte in 4 KiB pages
	               (allreduce baseline)
	allreduce      AllReduce (sum) of a TensorDict whose leaves have storages
	               of their own, as a model's gradients (in buckets below 256 KiB)
	allreduce-cons AllReduce (sum) of a consolidated TensorDict (one call)

The TensorDicts hold -leaves uint8 leaves (fewer for payloads of fewer
bytes) that share the payload, in one storage but for allreduce's and
initremote-set's. Many leaves (-leaves 65536 -methods initremote-set)
show what a TensorDict's size in leaves costs a transfer. The methods of one size are timed in rounds,
one repetition of each method in turn, so that noise from other processes
hits a method and its baseline alike; before each repetition the ranks
wait for the collections the receive pool started in the method before
(whose results were released) to end, then for the collector's cycle in
progress and the cleanups queued, so that what the method before left
running is not timed in this one. Rounds go on until every method has at least -iters
repetitions and the size has run for -time per method. A figure is the
median one-way time of a method's repetitions. Each method's
ratio compares it with the raw baseline of the same size and pattern: 2.00x
means twice as slow.

Bench prints a table on standard output and writes it as CSV to <out>.csv
(tools/benchplot, a module of its own, plots that file).
Rank 0 reports progress on standard error (-q silences it).

Run it under mpirun with two ranks or more (ranks past 1 take part in the
broadcasts and allreduces only):

	mpirun -np 2 --bind-to none tdmpi bench -max 64MiB -out /tmp/b`,
	flags: func(fs *flag.FlagSet, sio *stdio) func([]string) error {
		cfg := defaultBenchConfig()
		fs.Var(&cfg.min, "min", "smallest payload `size` (8B, 64KiB, 256MiB ...)")
		fs.Var(&cfg.max, "max", "largest payload `size`")
		fs.IntVar(&cfg.factor, "factor", cfg.factor, "ratio between consecutive sizes")
		fs.IntVar(&cfg.leaves, "leaves", cfg.leaves, "tensor leaves of the TensorDicts")
		fs.IntVar(&cfg.iters, "iters", cfg.iters, "at least this many timed repetitions of each method")
		fs.DurationVar(&cfg.time, "time", cfg.time, "time each method at each size for at least this long")
		fs.StringVar(&cfg.methods, "methods", cfg.methods, "comma-separated methods to run, with their baselines (all: "+methodNames()+")")
		fs.StringVar(&cfg.out, "out", cfg.out, "write <out>.csv (empty: no file)")
		fs.BoolVar(&cfg.quiet, "q", false, "do not report progress")
		return func(args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if err := cfg.check(); err != nil {
				return &usageError{msg: err.Error()}
			}
			return runBench(cfg, sio)
		}
	},
}

// benchConfig holds bench's flags.
type benchConfig struct {
	min, max byteSize
	factor   int
	leaves   int
	iters    int
	time     time.Duration
	methods  string
	out      string
	quiet    bool

	sizes []int64   // from check
	ms    []*method // from check
}

func defaultBenchConfig() benchConfig {
	return benchConfig{
		min:     8,
		max:     256 << 20,
		factor:  2,
		leaves:  16,
		iters:   5,
		time:    200 * time.Millisecond,
		methods: "all",
		out:     "tdmpi-bench",
	}
}

// check validates the flags and fills sizes and ms.
func (c *benchConfig) check() error {
	switch {
	case c.min < 1:
		return fmt.Errorf("-min %v: want 1 byte or more", &c.min)
	case c.max < c.min:
		return fmt.Errorf("-max %v is smaller than -min %v", &c.max, &c.min)
	case c.max > maxBenchSize:
		return fmt.Errorf("-max %v: want at most %s", &c.max, bytesize.Format(maxBenchSize))
	case c.factor < 2:
		return fmt.Errorf("-factor %d: want 2 or more", c.factor)
	case c.leaves < 1 || c.leaves > maxBenchLeaves:
		return fmt.Errorf("-leaves %d: want 1 to %d", c.leaves, maxBenchLeaves)
	case c.iters < 1:
		return fmt.Errorf("-iters %d: want 1 or more", c.iters)
	case c.time < 0:
		return fmt.Errorf("-time %v: want 0 or more", c.time)
	}
	ms, err := selectMethods(c.methods)
	if err != nil {
		return fmt.Errorf("-methods: %v", err)
	}
	c.ms = ms
	c.sizes = sizeSeries(int64(c.min), int64(c.max), int64(c.factor))
	if c.leaves > tensordict.MaxUserTag && slices.ContainsFunc(ms, func(m *method) bool { return m.name == "send-leaves" }) {
		return fmt.Errorf("-leaves %d: send-leaves sends a message per leaf, each on a tag of its own below %d: leave it out of -methods",
			c.leaves, tensordict.MaxUserTag)
	}
	return nil
}

// maxBenchLeaves bounds -leaves: a TensorDict of 1Mi leaves takes about
// a second to build, and as long to send.
const maxBenchLeaves = 1 << 20

// sizeSeries returns lo, lo*factor, lo*factor^2, ... up to hi, and hi.
func sizeSeries(lo, hi, factor int64) []int64 {
	var s []int64
	for v := lo; v <= hi; v *= factor {
		s = append(s, v)
		if v > hi/factor {
			break
		}
	}
	if s[len(s)-1] != hi {
		s = append(s, hi)
	}
	return s
}

// runBench starts MPI and measures every method at every size.
func runBench(cfg benchConfig, sio *stdio) (err error) {
	if err := needMPI("bench"); err != nil {
		return err
	}
	g, err := group.Init()
	if err != nil {
		return err
	}
	defer func() {
		if ferr := group.Finalize(); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}()
	rank, np := g.Rank(), g.Size()
	if np < 2 {
		return &usageError{msg: "bench needs 2 ranks or more: run it as mpirun -np 2 tdmpi bench"}
	}
	// A rank that fails while the others wait in a transfer would leave
	// them hanging: end the whole job.
	abort := func(err error) error {
		fmt.Fprintf(sio.err, "tdmpi bench: rank %d of %d: %v\n", rank, np, err)
		_ = mpi.Abort(g.Comm(), exitFailure)
		return err
	}

	// Rank 0 creates the output file before anything runs, and tells the
	// others whether it could.
	var csvFile *os.File
	openErr := error(nil)
	if rank == 0 && cfg.out != "" {
		csvFile, openErr = os.Create(cfg.out + ".csv")
	}
	ok := []int32{1}
	if openErr != nil {
		ok[0] = 0
	}
	if err := mpi.Bcast(g.Comm(), ok, 0); err != nil {
		return abort(err)
	}
	if ok[0] == 0 {
		if rank == 0 {
			return openErr
		}
		return nil // rank 0 reports
	}

	progress := io.Discard
	if rank == 0 && !cfg.quiet {
		progress = sio.err
	}
	names := make([]string, len(cfg.ms))
	for i, m := range cfg.ms {
		names[i] = m.name
	}
	fmt.Fprintf(progress, "bench: %d ranks, %d sizes from %s to %s, methods %s, %d leaves, >= %d repetitions and >= %v per method and size\n",
		np, len(cfg.sizes), bytesize.Format(cfg.sizes[0]), bytesize.Format(cfg.sizes[len(cfg.sizes)-1]),
		strings.Join(names, ","), cfg.leaves, cfg.iters, cfg.time)
	node := "on rank 0's node"
	if !g.SameNode(1) {
		node = "on another node" // the ping-pongs cross the network
	}
	fmt.Fprintf(progress, "bench: GOMAXPROCS %d, NumCPU %d, rank 1 %s\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), node)

	tm := timing{
		minReps: cfg.iters,
		minTime: cfg.time,
		maxReps: 100000,
		batch:   2 * time.Millisecond,
		warmup:  2,
	}
	var rs []result
	total, done := len(cfg.sizes)*len(cfg.ms), 0
	start := time.Now()
	for _, size := range cfg.sizes {
		steps := make([]func() error, len(cfg.ms))
		releases := make([]func() error, 0, len(cfg.ms))
		for i, m := range cfg.ms {
			step, release, err := m.prepare(g, size, cfg.leaves)
			if err != nil {
				return abort(fmt.Errorf("%s at %s: preparing: %w", m.name, bytesize.Format(size), err))
			}
			steps[i] = step
			releases = append(releases, release)
		}
		pool := mem.Stats()
		ss, err := measure(g, steps, tm)
		if err != nil {
			return abort(fmt.Errorf("at %s: %w", bytesize.Format(size), err))
		}
		for i, release := range releases {
			if err := release(); err != nil {
				return abort(fmt.Errorf("%s at %s: releasing: %w", cfg.ms[i].name, bytesize.Format(size), err))
			}
		}
		if size >= 16<<20 {
			runtime.GC() // drop the big buffers before the next size
		}
		if rank != 0 {
			continue
		}
		if p := mem.Stats(); p.Fresh+p.Reused > pool.Fresh+pool.Reused {
			fmt.Fprintf(progress, "bench: %8s receive pool (rank 0): %d fresh, %d reused, %d nudges (%.1f ms each)\n",
				bytesize.Format(size), p.Fresh-pool.Fresh, p.Reused-pool.Reused, p.Nudges-pool.Nudges,
				float64(p.NudgeNs-pool.NudgeNs)/1e6/float64(max(1, p.Nudges-pool.Nudges)))
		}
		for i, m := range cfg.ms {
			s := ss[i]
			r := result{
				Size: size, Method: m.name, Pattern: m.pattern, Baseline: m.baseline,
				Reps: len(s.oneway), Batch: s.batch, Median: median(s.oneway), Min: minOf(s.oneway),
			}
			if m.td {
				r.Leaves = leafCount(size, cfg.leaves)
			}
			rs = append(rs, r)
			done++
			fmt.Fprintf(progress, "bench: [%3d/%d %s] %8s %-14s %10s %8.3f GB/s  (%d repetitions)\n",
				done, total, time.Since(start).Round(time.Second), bytesize.Format(size), m.name,
				formatDuration(r.Median), r.Bandwidth(), r.Reps)
		}
	}
	if rank != 0 {
		return nil
	}
	setRatios(rs)
	if err := writeTable(sio.out, rs); err != nil {
		return err
	}
	if cfg.out == "" {
		return nil
	}
	if err := writeFile(csvFile, func(w io.Writer) error { return writeCSV(w, rs) }); err != nil {
		return err
	}
	fmt.Fprintf(progress, "bench: wrote %s\n", csvFile.Name())
	return nil
}

// writeFile writes f with write and closes it; errors name the file.
func writeFile(f *os.File, write func(io.Writer) error) error {
	err := write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	return nil
}

// minOf returns the smallest of xs, or 0 for none.
func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}
