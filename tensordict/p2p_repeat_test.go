// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestSendRepeated repeats a consolidated Send of one TensorDict, from a
// consolidated TensorDict and from one whose leaves Send packs: to one
// tag, then another and back (the first transfer to each carries the
// metadata, the next ones the header alone), through an ISend, and after a
// leaf is added on both sides (the state is rebuilt). The receiver checks
// every element of every transfer.
func TestSendRepeated(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	steps := []struct {
		name  string
		tag   int
		isend bool
		grow  bool // add a leaf first: the state is rebuilt
	}{
		{name: "first, with the metadata", tag: 0},
		{name: "second, described", tag: 0},
		{name: "third, described", tag: 0},
		{name: "another tag, with the metadata", tag: 5},
		{name: "another tag, described", tag: 5},
		{name: "back to the first tag", tag: 0},
		{name: "ISend", tag: 0, isend: true},
		{name: "after the ISend", tag: 0},
		{name: "a leaf more", tag: 0, grow: true},
		{name: "a leaf more, described", tag: 0},
		{name: "a leaf more, again", tag: 0},
	}
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			td := bigTD(t, 3, 4, 0)
			if !packed {
				var err error
				td, err = td.Consolidate()
				require.NoError(t, err)
			}
			for i, st := range steps {
				round := float64(10*i + 1)
				if st.grow {
					require.NoError(t, td.Set(K("x", "more"), tensor.Zeros(tensor.Float64, 4)))
				}
				fill(t, td, round)
				if g.Rank() == 1 {
					_, err := td.Recv(0, WithConsolidated(), WithTag(st.tag), testCtx(t))
					require.NoError(t, err, st.name)
					assert.True(t, td.EqScalar(round).All(), st.name)
					continue
				}
				if st.isend {
					p, err := td.ISend(1, WithConsolidated(), WithTag(st.tag))
					require.NoError(t, err, st.name)
					require.NoError(t, p.Wait(), st.name)
				} else {
					require.NoError(t, td.Send(1, WithConsolidated(), WithTag(st.tag)), st.name)
				}
			}
		})
	}
}

// TestTagLocksGoWithTheTensorDict: a TensorDict keeps the tag locks of its
// last Send and Recv referenced for the next (xfer.Held), and gives them
// back once it is collected. 2,100 TensorDicts, each sent once on a tag of
// its own and dropped, would otherwise leave 2,100 locks in the group's
// table for good; once they are collected, the locks are idle, and the
// table sweeps them out at its next new lock.
func TestTagLocksGoWithTheTensorDict(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	const n, base = 2100, 20000
	transfer := func(tag int) {
		td := bigTD(t, 1, 2, float64(tag))
		if g.Rank() == 0 {
			require.NoError(t, td.Send(1, WithConsolidated(), WithTag(tag)))
			return
		}
		_, err := td.Recv(0, WithConsolidated(), WithTag(tag), testCtx(t))
		require.NoError(t, err)
		checkBigTD(t, td, 1, 2, float64(tag))
	}
	_, before, _ := xfer.TagLocksInUse(g) // other tests' TensorDicts
	for i := range n {
		transfer(base + i)
	}
	held, kept, idle := xfer.TagLocksInUse(g)
	require.Zero(t, held)
	t.Logf("rank %d: after %d transfers, %d locks kept, %d idle", g.Rank(), n, kept, idle)
	// The TensorDicts are garbage: collect them, and let their cleanups run.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if _, kept, _ = xfer.TagLocksInUse(g); kept <= before {
			break
		}
	}
	assert.LessOrEqual(t, kept, before, "the collected TensorDicts' locks are released")
	transfer(base + n) // a new lock: a table of 2048 locks or more sweeps
	held, kept, idle = xfer.TagLocksInUse(g)
	assert.Zero(t, held)
	assert.Less(t, kept+idle, 2048, "the released locks are swept out")
}
