package tensordict

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// collBenchGroup returns the world for a multi-rank benchmark, or skips it.
// Every rank must run the same number of iterations, or the collectives
// would not match: the benchmark needs a fixed -test.benchtime=<N>x.
func collBenchGroup(b *testing.B) *group.Group {
	g := mpitest.Need(b, 2)
	if f := flag.Lookup("test.benchtime"); f == nil || !strings.HasSuffix(f.Value.String(), "x") {
		b.Skip("multi-rank benchmark: run with -test.benchtime=<N>x so that every rank runs the same iterations")
	}
	return g
}

// timed runs f between two barriers and returns how long it took, until
// every rank was done: the time of a collective is its slowest rank's.
func timed(b *testing.B, g *group.Group, f func() error) time.Duration {
	require.NoError(b, g.Barrier())
	start := time.Now()
	require.NoError(b, f())
	require.NoError(b, g.Barrier())
	return time.Since(start)
}

// BenchmarkCollectiveBroadcast broadcasts a consolidated TensorDict of
// 8 KiB, 1 MiB and 64 MiB (16 float32 leaves) from rank 0 and, in the same
// iterations, the same bytes with a raw mpi.Bcast into a buffer allocated
// once. It reports raw-ns/op and ratio = raw time / Broadcast time (1 is as
// fast as raw MPI). Plain receivers allocate a new storage every time; the
// -reuse variants receive into their previous result (WithConsolidated).
func BenchmarkCollectiveBroadcast(b *testing.B) {
	for _, size := range []int{8 << 10, 1 << 20, 64 << 20} {
		for _, reuse := range []bool{false, true} {
			name := fmt.Sprintf("%dKiB", size>>10)
			if reuse {
				name += "-reuse"
			}
			b.Run(name, func(b *testing.B) { benchBroadcast(b, size, reuse) })
		}
	}
}

// BenchmarkCollectiveBroadcast256MiB: Broadcast of 256 MiB into a new
// TensorDict each time (the previous result dropped), against mpi.Bcast.
func BenchmarkCollectiveBroadcast256MiB(b *testing.B) { benchBroadcast(b, 256<<20, false) }

// benchBroadcast broadcasts size bytes in 16 leaves; with reuse, receivers
// pass their previous result with WithConsolidated, which receives in
// place.
func benchBroadcast(b *testing.B, size int, reuse bool) {
	g := collBenchGroup(b)
	const leaves = 16
	td := New()
	for i := range leaves {
		require.NoError(b, td.Set(K(fmt.Sprintf("l%02d", i)), tensor.Full(tensor.Float32, float64(i), size/leaves/4)))
	}
	tdc, err := td.Consolidate()
	require.NoError(b, err)
	raw := make([]byte, size)
	if g.Rank() == 0 {
		copy(raw, tdc.ConsolidatedStorage().Bytes())
	}
	var opts []any
	if reuse {
		opts = append(opts, WithConsolidated())
	}
	var mine *TensorDict
	if g.Rank() == 0 {
		mine = tdc
	}
	var tRaw, tTD time.Duration
	pool0 := mem.Stats()
	b.SetBytes(int64(size))
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		tRaw += timed(b, g, func() error { return mpi.Bcast(g.Comm(), raw, 0) })
		b.StartTimer()
		tTD += timed(b, g, func() error {
			got, err := mine.Broadcast(0, mpitest.As[CollectiveOption](opts)...)
			if err == nil && got.ConsolidatedStorage().Len() != size {
				err = fmt.Errorf("got %d bytes", got.ConsolidatedStorage().Len())
			}
			if reuse {
				mine = got
			}
			return err
		})
		b.StopTimer()
	}
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(tRaw)/float64(tTD), "ratio")
	if g.Rank() != 0 {
		reportPool(b, pool0)
	}
}

// BenchmarkCollectiveAllReduce takes the maximum of 16 MiB of float32
// across the ranks: one leaf, 64 leaves reduced one by one, 1024 small
// leaves reduced in buckets, and 64 leaves consolidated (one call over the
// storage), each against a raw in-place mpi.Allreduce of the same number
// of elements. It reports raw-ns/op and
// ratio = raw time / AllReduce time.
func BenchmarkCollectiveAllReduce(b *testing.B) {
	const size = 16 << 20
	for _, tc := range []struct {
		name   string
		leaves int
		cons   bool
	}{
		{"1leaf", 1, false},
		{"64leaves", 64, false},     // 256 KiB each: one call per leaf
		{"1024leaves", 1024, false}, // 16 KiB each: copied into 4 MiB buckets
		{"64leaves-consolidated", 64, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := collBenchGroup(b)
			td := New()
			for i := range tc.leaves {
				require.NoError(b, td.Set(K(fmt.Sprintf("l%04d", i)), tensor.Full(tensor.Float32, 1, size/tc.leaves/4)))
			}
			if tc.cons {
				var err error
				td, err = td.Consolidate()
				require.NoError(b, err)
			}
			raw := make([]float32, size/4)
			var tRaw, tTD time.Duration
			b.SetBytes(size)
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				tRaw += timed(b, g, func() error { return mpi.AllreduceInPlace(g.Comm(), raw, mpi.OpMax) })
				b.StartTimer()
				tTD += timed(b, g, func() error { return td.AllReduce(ReduceMax) })
				b.StopTimer()
			}
			b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "raw-ns/op")
			b.ReportMetric(float64(tRaw)/float64(tTD), "ratio")
		})
	}
}

// BenchmarkCollectiveIAllReduceOverlap measures how much of an IAllReduce
// of 64 MiB of float32 (consolidated) hides behind computation on another
// goroutine: compute alone (a scaling pass over 64 MiB of other data,
// repeated to last about as long as the reduction), the reduction alone
// (IAllReduce then Wait), and both at once (IAllReduce, compute on a
// goroutine while this one Waits). It reports overlap = both /
// max(compute, reduction): 1 is perfect overlap, 2 is none. MPI makes
// progress only inside MPI calls, so the waiting goroutine spins on a core
// of its own: overlap needs a spare core per rank beside the one computing
// (on a 2-core machine at np 2 there is none, and the ratio is near 2).
func BenchmarkCollectiveIAllReduceOverlap(b *testing.B) {
	const size = 64 << 20
	g := collBenchGroup(b)
	td, err := func() (*TensorDict, error) {
		td := New()
		for i := range 16 {
			if err := td.Set(K(fmt.Sprintf("g%02d", i)), tensor.Full(tensor.Float32, 1, size/16/4)); err != nil {
				return nil, err
			}
		}
		return td.Consolidate()
	}()
	require.NoError(b, err)
	work := tensor.Full(tensor.Float32, 1, size/4)
	passes := 1
	compute := func() error {
		for range passes {
			if err := work.MulScalarInPlace(1); err != nil {
				return err
			}
		}
		return nil
	}
	reduce := func() error {
		p, err := td.IAllReduce(ReduceMax)
		if err != nil {
			return err
		}
		return p.Wait()
	}
	// Calibrate passes so that compute lasts about as long as reduce.
	tr := timed(b, g, reduce)
	tc := timed(b, g, compute)
	passes = max(1, int(tr/max(tc, 1)))
	cal := []int32{int32(passes)}
	require.NoError(b, mpi.AllreduceInPlace(g.Comm(), cal, mpi.OpMax))
	passes = int(cal[0])

	var tComp, tRed, tBoth time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		tComp += timed(b, g, compute)
		tRed += timed(b, g, reduce)
		tBoth += timed(b, g, func() error {
			p, err := td.IAllReduce(ReduceMax)
			if err != nil {
				return err
			}
			done := make(chan error, 1)
			go func() { done <- compute() }()
			return errors.Join(p.Wait(), <-done)
		})
	}
	b.ReportMetric(float64(tComp.Nanoseconds())/float64(b.N), "compute-ns/op")
	b.ReportMetric(float64(tRed.Nanoseconds())/float64(b.N), "reduce-ns/op")
	b.ReportMetric(float64(tBoth)/float64(max(tComp, tRed)), "overlap")
}
