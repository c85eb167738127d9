package tensordict

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
)

// The benchmarks below time the metadata path of a small transfer: the seed
// TensorDict (three float32 leaves, batch [1 2], 32 bytes of storage), which
// is where the per-message cost of InitRemote and FromRemoteInit lies.

// cpuPerOp reports, when the benchmark ends, the CPU time the process spent
// per operation (GC included): on a shared machine it is steadier than the
// wall time, which counts the time other processes hold the CPU.
func cpuPerOp(b *testing.B) {
	start := cpuTime(b)
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		}
	})
}

func seedConsolidated(b *testing.B) (*TensorDict, []byte) {
	c, err := seedTD(b).Consolidate()
	require.NoError(b, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(b, err)
	return c, meta
}

func BenchmarkMetaSeedLayout(b *testing.B) {
	td := seedTD(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, _, err := Layout(td); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaSeedConsolidatedMetadata(b *testing.B) {
	c, _ := seedConsolidated(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, err := c.ConsolidatedMetadata(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaSeedConsolidate(b *testing.B) {
	td := seedTD(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, err := td.Consolidate(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaSeedFromConsolidated(b *testing.B) {
	c, meta := seedConsolidated(b)
	st := c.ConsolidatedStorage()
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, err := FromConsolidated(st, meta); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaSeedStructureHash(b *testing.B) {
	_, meta := seedConsolidated(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, err := StructureHash(meta); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaSeedDiffStructureMeta(b *testing.B) {
	c, meta := seedConsolidated(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if err := DiffStructureMeta(c, meta); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaSeedSignature(b *testing.B) {
	c, _ := seedConsolidated(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		_ = c.Signature()
	}
}

func BenchmarkMetaSeedIsConsolidated(b *testing.B) {
	c, _ := seedConsolidated(b)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if !c.IsConsolidated() {
			b.Fatal("not consolidated")
		}
	}
}

func BenchmarkMeta10kLayout(b *testing.B) {
	c, _ := manyLeaves(b, 10000)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, _, err := Layout(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMetaSeedJSONValid is a yardstick: encoding/json checking the
// seed metadata, without building anything.
func BenchmarkMetaSeedJSONValid(b *testing.B) {
	_, meta := seedConsolidated(b)
	b.SetBytes(int64(len(meta)))
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if !json.Valid(meta) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkMetaSeedDecode(b *testing.B) {
	c, meta := seedConsolidated(b)
	n := c.ConsolidatedStorage().Len()
	cfg := codec.DefaultLimits()
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, _, err := codec.Decode(meta, n, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMetaSeedBuild times rebuilding the seed from decoded metadata,
// as a receive whose metadata is in the receive cache does.
func BenchmarkMetaSeedBuild(b *testing.B) {
	c, meta := seedConsolidated(b)
	st := c.ConsolidatedStorage()
	root, _, err := codec.Decode(meta, st.Len(), codec.DefaultLimits())
	require.NoError(b, err)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		if _, err := buildFromMeta(root, st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMetaSmall16Build times making the TensorDict of
// BenchmarkRemoteSmall16 (16 leaves under one child) from decoded
// metadata, the receiver's share of a small InitRemote whose metadata is
// in the receive cache: built from the metadata (build), copied from the
// receive template over a given storage (template), and copied from the
// template with the storage's bytes in the same allocation (copy, what a
// receive of inline storage does).
func BenchmarkMetaSmall16Build(b *testing.B) {
	c := consolidatedTD(b, 16, 64)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(b, err)
	st := c.ConsolidatedStorage()
	root, _, err := codec.Decode(meta, st.Len(), codec.DefaultLimits())
	require.NoError(b, err)
	tp, err := newTemplate(root, st.Len())
	require.NoError(b, err)
	for _, m := range []struct {
		name  string
		build func() (*TensorDict, error)
	}{
		{"build", func() (*TensorDict, error) { return buildFromMeta(root, st) }},
		{"template", func() (*TensorDict, error) { return tp.instantiate(st) }},
		{"copy", func() (*TensorDict, error) { return tp.instantiateCopy(st.Bytes()) }},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			cpuPerOp(b)
			for b.Loop() {
				if _, err := m.build(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
