package tensordict

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

func nestedForGet(t testing.TB) (*TensorDict, Key) {
	td := New(2)
	k := K("level1", "level2", "level3", "leaf")
	require.NoError(t, td.Set(k, tensor.Ones(tensor.Float32, 2)))
	for i := 0; i < 50; i++ {
		require.NoError(t, td.Set(K("level1", fmt.Sprintf("k%d", i)), tensor.Ones(tensor.Float32, 2)))
	}
	return td, k
}

func TestGetDoesNotAllocate(t *testing.T) {
	td, k := nestedForGet(t)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := td.Get(k); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkGetNested(b *testing.B) {
	td, k := nestedForGet(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := td.Get(k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConsolidate packs 256 MiB held in 64 leaves and reports, beside
// the time, two plain copies of the same bytes measured in the same run: into
// a buffer allocated once and already touched (memcpy-ms), and into a freshly
// allocated buffer, as Consolidate must (alloc+memcpy-ms), with the ratios of
// their times to Consolidate's (1 means as fast as the copy).
func BenchmarkConsolidate(b *testing.B) {
	const leaves, total = 64, 256 << 20
	td := New()
	srcs := make([][]byte, leaves)
	for i := range leaves {
		x := tensor.Full(tensor.Float32, float64(i), total/leaves/4)
		require.NoError(b, td.Set(K(fmt.Sprintf("l%02d", i)), x))
		srcs[i], _ = x.Bytes()
	}
	dst := make([]byte, total)
	memcpy := func() time.Duration {
		start := time.Now()
		off := 0
		for _, s := range srcs {
			off += copy(dst[off:], s)
		}
		return time.Since(start)
	}
	best := time.Duration(1 << 62)
	for range 5 {
		best = min(best, memcpy())
	}
	fresh := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		d := make([]byte, total)
		off := 0
		for _, s := range srcs {
			off += copy(d[off:], s)
		}
		fresh = min(fresh, time.Since(start))
	}
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		c, err := td.Consolidate()
		if err != nil {
			b.Fatal(err)
		}
		if c.ConsolidatedStorage().Len() != total {
			b.Fatal("wrong size")
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(best.Microseconds())/1e3, "memcpy-ms")
	b.ReportMetric(float64(best)/float64(per), "memcpy/consolidate")
	b.ReportMetric(float64(fresh.Microseconds())/1e3, "alloc+memcpy-ms")
	b.ReportMetric(float64(fresh)/float64(per), "alloc+memcpy/consolidate")
}

// BenchmarkConsolidateInto is BenchmarkConsolidate into a reused buffer.
func BenchmarkConsolidateInto(b *testing.B) {
	const leaves, total = 64, 256 << 20
	td := New()
	for i := range leaves {
		require.NoError(b, td.Set(K(fmt.Sprintf("l%02d", i)), tensor.Full(tensor.Float32, float64(i), total/leaves/4)))
	}
	buf := make([]byte, total)
	b.SetBytes(total)
	for b.Loop() {
		if _, err := td.ConsolidateInto(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// manyLeaves returns a consolidated TensorDict of n small leaves spread over
// n/100 nested levels, with its metadata.
func manyLeaves(t testing.TB, n int) (*TensorDict, []byte) {
	td := New(4)
	for i := range n {
		require.NoError(t, td.Set(K(fmt.Sprintf("node%03d", i/100), fmt.Sprintf("leaf%03d", i%100)), tensor.Ones(tensor.Float32, 4, 3)))
	}
	c := mustConsolidate(t, td)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	return c, meta
}

func BenchmarkFromConsolidated10k(b *testing.B) {
	c, meta := manyLeaves(b, 10000)
	st := c.ConsolidatedStorage()
	b.SetBytes(int64(len(meta)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromConsolidated(st, meta); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/op")
}

func TestFromConsolidated10kIsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test skipped in -short mode")
	}
	if raceEnabled {
		t.Skip("timing test skipped under the race detector")
	}
	c, meta := manyLeaves(t, 10000)
	// The machine is shared: measure the CPU time the process spends (GC
	// included), which other processes do not inflate, and keep the best.
	best := time.Hour
	for range 5 {
		start := cpuTime(t)
		td, err := FromConsolidated(c.ConsolidatedStorage(), meta)
		require.NoError(t, err)
		best = min(best, cpuTime(t)-start)
		require.Len(t, td.Keys(IncludeNested(), LeavesOnly()), 10000)
	}
	t.Logf("FromConsolidated of 10,000 leaves: %v CPU", best)
	assert.Less(t, best, 50*time.Millisecond, "FromConsolidated of 10,000 leaves")
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
