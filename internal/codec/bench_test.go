package codec

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// The JSON reader was chosen by these benchmarks (see the package doc):
// each reader decodes the same metadata into the same Node tree, with the
// same checks. Run them together:
//
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench Reader ./internal/codec

// reader is one way of decoding metadata into a tree.
type reader struct {
	name   string
	decode func(meta []byte, stLen int) error
}

// readers are the contenders; jsontext_test.go adds jsontext's.
var readers = []reader{
	{"hand", func(meta []byte, stLen int) error {
		d := NewDecoder()
		_, _, err := d.Decode(meta, stLen, DefaultLimits())
		d.Release()
		return err
	}},
	{"encoding-json", func(meta []byte, stLen int) error {
		_, _, err := oracleDecode(meta, stLen, DefaultLimits())
		return err
	}},
}

// manyLeavesMeta returns the metadata of n float32 [4 3] leaves under
// batch [4], 100 to a nested TensorDict, as tensordict's benchmarks lay
// them out, and the storage size.
func manyLeavesMeta(n int) ([]byte, int) {
	batch := []int{4}
	leaf := tensor.Zeros(tensor.Float32, 4, 3)
	b := AppendNodeMetadata(AppendLeavesStart(AppendNodeStart(nil)), batch, false)
	off := 0
	for i := 0; i < n; i += 100 {
		b = AppendLeavesStart(AppendNodeStart(AppendChild(b, fmt.Sprintf("node%03d", i/100))))
		for j := i; j < min(i+100, n); j++ {
			b = AppendLeaf(b, fmt.Sprintf("leaf%03d", j%100), leaf, off, off+48, 0)
			off += 48
		}
		b = AppendNodeEnd(AppendNodeMetadata(b, batch, false))
	}
	return AppendNodeEnd(b), off
}

func BenchmarkReader(b *testing.B) {
	seed, err := os.ReadFile("testdata/golden/seed.json")
	require.NoError(b, err)
	many, manyLen := manyLeavesMeta(10000)
	for _, in := range []struct {
		name  string
		meta  []byte
		stLen int
	}{{"seed", seed, 32}, {"10k", many, manyLen}} {
		for _, r := range readers {
			b.Run(in.name+"/"+r.name, func(b *testing.B) {
				require.NoError(b, r.decode(in.meta, in.stLen))
				b.SetBytes(int64(len(in.meta)))
				b.ReportAllocs()
				start := cpuTime(b)
				defer func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op") }()
				for b.Loop() {
					if err := r.decode(in.meta, in.stLen); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestReadersAgree checks that the contenders decode the benchmark inputs
// to the same tree, so that they are timed doing the same work.
func TestReadersAgree(t *testing.T) {
	many, n := manyLeavesMeta(1000)
	root, class, err := Decode(many, n, DefaultLimits())
	require.NoError(t, err)
	want := dump(root, class)
	for _, r := range alternatives {
		got, gclass, err := r(many, n, DefaultLimits())
		require.NoError(t, err)
		require.Equal(t, want, dump(got, gclass))
	}
}

// alternatives are the library-based decoders, for TestReadersAgree.
var alternatives = []func(meta []byte, stLen int, lim Limits) (*Node, string, error){oracleDecode}

func BenchmarkWriter10k(b *testing.B) {
	buf := make([]byte, 0, MetadataSize(1, 10000))
	leaf := tensor.Zeros(tensor.Float32, 4, 3)
	b.ReportAllocs()
	for b.Loop() {
		m := AppendLeavesStart(AppendNodeStart(buf[:0]))
		for i := range 10000 {
			m = AppendLeaf(m, "leaf", leaf, 48*i, 48*i+48, 0)
		}
		buf = AppendNodeEnd(AppendNodeMetadata(m, []int{4}, false))
	}
}

// cpuTime returns the CPU time of the process so far. On a shared machine
// the CPU time per operation is steadier than the wall time, which counts
// the time other processes hold the CPU.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
