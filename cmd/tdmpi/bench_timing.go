// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
)

// timing says how long to measure each point.
type timing struct {
	minReps int           // at least this many timed repetitions
	minTime time.Duration // and at least this long
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

// measure runs step on every rank of g, in timed repetitions that rank 0
// controls: before each one, rank 0 broadcasts whether to go on and how
// many steps the repetition runs, so that every rank runs the same steps.
// Each step moves the payload twice; the one-way time of a repetition is
// its duration over twice its steps. Times are rank 0's.
func measure(g *group.Group, step func() error, tm timing) (sample, error) {
	for i := range tm.warmup {
		if err := step(); err != nil {
			return sample{}, fmt.Errorf("warm-up step %d: %w", i, err)
		}
	}
	var (
		s     = sample{batch: 1}
		ctrl  = make([]int64, 2) // go on (0 or 1), steps per repetition
		start = time.Now()
		root  = g.Rank() == 0
	)
	for {
		if root {
			n := len(s.oneway)
			goOn := n < tm.maxReps && (n < tm.minReps || time.Since(start) < tm.minTime)
			ctrl[0], ctrl[1] = 0, int64(s.batch)
			if goOn {
				ctrl[0] = 1
			}
		}
		if err := mpi.Bcast(g.Comm(), ctrl, 0); err != nil {
			return sample{}, fmt.Errorf("control broadcast: %w", err)
		}
		if ctrl[0] == 0 {
			return s, nil
		}
		steps := int(ctrl[1])
		t0 := time.Now()
		for i := range steps {
			if err := step(); err != nil {
				return sample{}, fmt.Errorf("repetition %d, step %d: %w", len(s.oneway), i, err)
			}
		}
		d := time.Since(t0)
		s.oneway = append(s.oneway, d.Seconds()/float64(2*steps))
		if root && len(s.oneway) == 1 {
			// The first repetition is one step: size the batches after it.
			s.batch = batchSteps(d, tm.batch)
		}
	}
}

// batchSteps returns how many steps of duration one last about target,
// between 1 and 1<<16.
func batchSteps(one, target time.Duration) int {
	if one <= 0 {
		return 1 << 16
	}
	return int(min(max(int64(target/one), 1), 1<<16))
}
