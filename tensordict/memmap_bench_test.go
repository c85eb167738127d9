package tensordict

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/tensor"
)

// benchTD returns a TensorDict of total bytes in 16 float32 leaves, and the
// bytes of its leaves.
func benchTD(b *testing.B, total int) (*TensorDict, [][]byte) {
	b.Helper()
	const leaves = 16
	per := total / leaves / 4
	td := New()
	var bufs [][]byte
	for i := 0; i < leaves; i++ {
		t := tensor.Full(tensor.Float32, float64(i), per)
		if err := td.Set(K(fmt.Sprintf("n%d", i%4), fmt.Sprintf("leaf%d", i)), t); err != nil {
			b.Fatal(err)
		}
		bb, _ := t.Bytes()
		bufs = append(bufs, bb)
	}
	return td, bufs
}

// benchBytes is the size of the benchmarks' TensorDicts: 1 GiB, or 64 MiB
// with -short.
func benchBytes() int {
	if testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

// writeBaseline writes bufs to one new file with a plain os.File.Write
// loop, optionally with an fsync at the end, and returns the time taken.
func writeBaseline(b *testing.B, dir string, bufs [][]byte, sync bool) time.Duration {
	start := time.Now()
	f, err := os.Create(filepath.Join(dir, "baseline"))
	if err != nil {
		b.Fatal(err)
	}
	for _, buf := range bufs {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkMemmap saves a TensorDict of 16 leaves (1 GiB; 64 MiB with
// -short) and reports, next to its own speed, the ratio of its throughput to
// that of writing the same bytes to one file with os.File.Write (target >=
// 0.5), with the baseline synced or not as the Memmap is.
func BenchmarkMemmap(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []MemmapOption
		sync bool
	}{
		{"synced", nil, true},
		{"nosync", []MemmapOption{MemmapNoSync()}, false},
	} {
		b.Run(mode.name, func(b *testing.B) {
			total := benchBytes()
			td, bufs := benchTD(b, total)
			b.SetBytes(int64(total))
			var tm, tb time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				base := b.TempDir()
				dir := filepath.Join(b.TempDir(), "td")
				tb += writeBaseline(b, base, bufs, mode.sync)
				os.RemoveAll(base)
				b.StartTimer()
				start := time.Now()
				m, err := td.Memmap(dir, mode.opts...)
				if err != nil {
					b.Fatal(err)
				}
				tm += time.Since(start)
				b.StopTimer()
				m.Release()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(tb.Seconds()/tm.Seconds(), "ratio-vs-write")
			b.ReportMetric(float64(total)/tm.Seconds()/(1<<30), "GiB/s")
		})
	}
}

// BenchmarkLoadMemmap loads a saved TensorDict of 16 leaves (1 GiB; 64 MiB
// with -short). Loading maps the files without reading them, so the time
// depends on the number of leaves, not on their size (target < 10 ms).
func BenchmarkLoadMemmap(b *testing.B) {
	td, _ := benchTD(b, benchBytes())
	dir := filepath.Join(b.TempDir(), "td")
	m, err := td.Memmap(dir, MemmapNoSync())
	if err != nil {
		b.Fatal(err)
	}
	m.Release()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := LoadMemmap(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Release()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/load")
}
