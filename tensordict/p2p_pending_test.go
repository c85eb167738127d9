// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"runtime/debug"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
)

// waitTwice calls p.Wait from goroutines goroutines at once, and p.Test
// and p.Tag meanwhile, and returns the errors of the Waits.
func waitTwice(p *Pending, goroutines int) []error {
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = p.Wait()
		})
	}
	wg.Go(func() {
		<-start
		for range 100 {
			if done, _ := p.Test(); done {
				break
			}
		}
		_ = p.Tag()
	})
	close(start)
	wg.Wait()
	return errs
}

// TestPendingConcurrentWait: Wait called on one Pending from several
// goroutines at once, with Test and Tag beside them, does not crash (it
// did in mpi.Request.finish): every Wait returns the transfer's result,
// the later ones once the first has completed it. For ISend, IRecv and
// IAllReduce, run under -race too.
func TestPendingConcurrentWait(t *testing.T) {
	g := mpitest.Need(t, 2)
	prev, next := ring(g.Rank(), g.Size())
	const tag, rounds, goroutines = 941, 20, 4
	for r := range rounds {
		out := bigTD(t, 4, 1<<15, float64(10*g.Rank()+r)) // 256 KiB leaves, beyond the eager limits
		in := bigTD(t, 4, 1<<15, 0)
		sp, err := out.ISend(next, WithTag(tag))
		require.NoError(t, err)
		rp, err := in.IRecv(prev, WithTag(tag), testCtx(t))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var serrs, rerrs []error
		wg.Go(func() { serrs = waitTwice(sp, goroutines) })
		wg.Go(func() { rerrs = waitTwice(rp, goroutines) })
		wg.Wait()
		for i := range goroutines {
			require.NoError(t, serrs[i], "round %d: ISend's Wait %d", r, i)
			require.NoError(t, rerrs[i], "round %d: IRecv's Wait %d", r, i)
		}
		checkBigTD(t, in, 4, 1<<15, float64(10*prev+r))
		assert.Equal(t, tag+3, rp.Tag())

		ar := bigTD(t, 2, 1<<15, 1)
		ap, err := ar.IAllReduce(ReduceSum, testCtx(t))
		require.NoError(t, err)
		for i, err := range waitTwice(ap, goroutines) {
			require.NoError(t, err, "round %d: IAllReduce's Wait %d", r, i)
		}
		for i, it := range ar.Items(IncludeNested(), LeavesOnly()) {
			collRequireAll(t, it.Tensor, float64(g.Size()*(1+i)), it.Key.String())
		}
	}
}

// TestISendDroppedReleased: the sends of ISends whose Pendings are
// dropped without Wait are released by the ISends after them once they
// have completed, not when the collector finds the Pendings: with the
// collector off, 1,000 dropped ISends of 32 KiB (their packed copies, one
// request each) leave nothing in flight once the receiver has taken them
// all and the ISends after them (reapSends) have seen them complete. Before, every one of them stayed
// pinned until a collection, and 8,000 grew a sender to 1.1 GB.
func TestISendDroppedReleased(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n, tag = 1000, 942
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	td := bigTD(t, 2, 1<<11, 5) // two leaves of 16 KiB, not consolidated: packed per ISend
	opts := []SendOption{WithTag(tag), WithConsolidated()}
	switch g.Rank() {
	case 0:
		base := mpix.InFlight()
		for i := range n {
			_, err := td.ISend(1, opts...)
			require.NoError(t, err, "ISend %d", i)
		}
		require.NoError(t, g.Barrier()) // the receiver took them all
		p, err := td.ISend(1, opts...)
		require.NoError(t, err)
		require.NoError(t, p.Wait())
		// MPI notes a send complete as its progress engine handles the
		// receiver's acknowledgement, and MPICH handles a few per test:
		// the reaping of the ISends that follow, whose every test
		// progresses, releases them all, however late.
		for k := 0; mpix.InFlight() > base && k < 100*n; k++ {
			reapSends()
		}
		assert.LessOrEqual(t, mpix.InFlight(), base, "requests in flight after %d dropped ISends, all received", n)
	case 1:
		in := bigTD(t, 2, 1<<11, 0)
		for i := range n {
			_, err := in.Recv(0, WithTag(tag), WithConsolidated(), testCtx(t))
			require.NoError(t, err, "Recv %d", i)
		}
		require.NoError(t, g.Barrier())
		_, err := in.Recv(0, WithTag(tag), WithConsolidated(), testCtx(t))
		require.NoError(t, err)
		checkBigTD(t, in, 2, 1<<11, 5)
	default:
		require.NoError(t, g.Barrier())
	}
}
