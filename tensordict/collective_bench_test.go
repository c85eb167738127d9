package tensordict

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
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
