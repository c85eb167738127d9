// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/mpi"
)

// TestProbeLate: a probe bounded by a context (Poll) notices a message
// whose sender came late about as soon as a blocking probe does. Rank 0
// sends 200 us after a barrier, rank 1 probes with and without a context
// in turn (other ranks only join the barriers), and compares how long
// each took past the 200 us. Polling between timer sleeps instead, which
// last a millisecond or more on Linux however short the sleep asked for,
// took 1.6-1.9 ms past it, against 0.02-0.15 ms for the blocking probe.
func TestProbeLate(t *testing.T) {
	g := mpitest.Need(t, 2)
	const late, trials = 200 * time.Microsecond, 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := g.LibComm()
	var over [2]time.Duration // past late: blocking, with a context
	for i := range 2 * trials {
		require.NoError(t, c.Barrier())
		switch g.Rank() {
		case 0:
			for t0 := time.Now(); time.Since(t0) < late; {
			}
			require.NoError(t, mpi.Send(c, []int64{int64(i)}, 1, 5))
			continue
		case 1:
		default:
			continue // in the barriers only
		}
		pctx := context.Background() // cannot end: a blocking probe
		if i%2 == 1 {
			pctx = ctx
		}
		t0 := time.Now()
		var m mpi.Message
		_, err := Probe(pctx, c, 0, 5, &m)
		waited := time.Since(t0)
		require.NoError(t, err)
		got := make([]int64, 1)
		_, err = mpi.Mrecv(&m, got)
		require.NoError(t, err)
		require.Equal(t, int64(i), got[0])
		over[i%2] += max(waited-late, 0)
	}
	if g.Rank() == 1 {
		blocking, polled := over[0]/trials, over[1]/trials
		t.Logf("past the sender's %v, on average: blocking probe %v, with a context %v", late, blocking, polled)
		assert.Less(t, polled, blocking+late, "a probe with a context noticed the message %v after a blocking one", polled-blocking)
	}
}
