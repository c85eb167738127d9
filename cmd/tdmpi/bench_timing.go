// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/mpi"
)

// timing says how long to measure each point.
type timing struct {
	minReps int           // at least this many timed repetitions
	minTime time.Duration // and at least this long per method
	maxReps int           // at most this many repetitions
	batch   time.Duration // a repetition runs enough steps to last about this long
	warmup  int           // untimed steps first
}

// sample is the measurement of one point: one-way times in seconds of
// every repetition, and the steps per repetition.
type sample struct {
	oneway []float64
	batch  int
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// measure times the steps of several methods on every rank of g, in
// rounds: each round runs one timed repetition of every method in turn, so
// that a burst of noise on a shared machine hits the methods (and their
// baselines) alike. Before each round rank 0 broadcasts whether to go on
// and how many steps each method's repetition runs, so that every rank
// runs the same steps. Rounds go on until there are at least minReps and
// the rounds have lasted minTime per method.
//
// Each step moves the payload twice; the one-way time of a repetition is
// its duration over twice its steps. Times are rank 0's.
func measure(g *group.Group, steps []func() error, tm timing) ([]sample, error) {
	for i, step := range steps {
		for w := range tm.warmup {
			if err := step(); err != nil {
				return nil, fmt.Errorf("method %d: warm-up step %d: %w", i, w, err)
			}
		}
	}
	var (
		ss    = make([]sample, len(steps))
		ctrl  = make([]int64, 1+len(steps)) // go on (0 or 1), steps per repetition of each method
		start = time.Now()
		root  = g.Rank() == 0
		total = tm.minTime * time.Duration(len(steps))
	)
	for i := range ss {
		ss[i].batch = 1 // the first repetition is one step; the batches are sized after it
	}
	for round := 0; ; round++ {
		if root {
			goOn := round < tm.maxReps && (round < tm.minReps || time.Since(start) < total)
			ctrl[0] = 0
			if goOn {
				ctrl[0] = 1
			}
			for i := range ss {
				ctrl[1+i] = int64(ss[i].batch)
			}
		}
		if err := mpi.Bcast(g.Comm(), ctrl, 0); err != nil {
			return nil, fmt.Errorf("control broadcast: %w", err)
		}
		if ctrl[0] == 0 {
			return ss, nil
		}
		for i, step := range steps {
			// The collections the receive pool started for the method
			// before end first, on every rank, so that they are not timed
			// here: they would take a core from a rank waiting for a message.
			mem.Settle()
			quiesce()
			if err := g.Comm().Barrier(); err != nil {
				return nil, fmt.Errorf("method %d: round %d: barrier: %w", i, round, err)
			}
			n := int(ctrl[1+i])
			t0 := time.Now()
			for j := range n {
				if err := step(); err != nil {
					return nil, fmt.Errorf("method %d: round %d, step %d: %w", i, round, j, err)
				}
			}
			d := time.Since(t0)
			ss[i].oneway = append(ss[i].oneway, d.Seconds()/float64(2*n))
			if root {
				// A stall (a collection, a preempted rank) only makes a
				// repetition slower: the fastest so far sizes the batch.
				b := batchSteps(d/time.Duration(n), tm.batch)
				if round == 0 || b > ss[i].batch {
					ss[i].batch = b
				}
			}
		}
	}
}

// batchSteps returns how many steps of duration one last about target,
// between 1 and 1<<16. measure sizes each method's repetitions by the
// fastest mean step of its repetitions so far, so that they grow to the
// target as the method reaches its steady state. The first steps of a
// method are often far slower than the later ones (a template to build,
// a heap or receive pool growing into memory the process never used, at
// about 10 us per 4 KiB page on this project's VM): sized from round 0's
// single step, as it once was, a batch was 9 InitRemotes of 1 KiB (50
// us, the switch from the previous method counted in every repetition)
// against 319 raw messages; sized from the first ten rounds, 1 at 128
// KiB, whose first rounds all took new regions.
func batchSteps(one, target time.Duration) int {
	if one <= 0 {
		return 1 << 16
	}
	return int(min(max(int64(target/one), 1), 1<<16))
}

// quiesce waits until the collector's cycle in progress, if any, has
// ended, and the cleanups queued so far have run, without starting a
// cycle: what a method left running in the background would otherwise
// run in the next method's repetition (at GOMAXPROCS=1 the collector's
// worker takes a quarter of the core while it marks), and only in the
// methods that follow one that allocates. Disabling the collector waits
// for the cycle in progress to end (runtime/debug.SetGCPercent: it
// returns with none running); the setting is restored at once.
func quiesce() {
	debug.SetGCPercent(debug.SetGCPercent(-1))
	s := []metrics.Sample{{Name: "/gc/cleanups/queued:cleanups"}, {Name: "/gc/cleanups/executed:cleanups"}}
	for range 1000 {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Uint64() >= s[0].Value.Uint64() {
			return
		}
		runtime.Gosched()
	}
}
