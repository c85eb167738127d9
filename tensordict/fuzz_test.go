package tensordict

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tdmpi/tdmpi/tensor"
)

// fuzzLimits keep a fuzz input from asking for more work than a few
// megabytes, whatever it says.
var fuzzLimits = []ConsolidatedOption{WithMaxEntries(4096), WithMaxMetadataBytes(1 << 20)}

func addSeeds(f *testing.F, add func(meta []byte, stLen int)) {
	for _, td := range []*TensorDict{seedTD(f), seedMixed(f), seedNonTensor(f), stackTree(f)} {
		meta, n, err := Layout(td)
		if err != nil {
			f.Fatal(err)
		}
		add(meta, n)
	}
}

func seedMixed(f testing.TB) *TensorDict {
	td := New(3)
	td.Set(K("x"), tensor.Ones(tensor.Float32, 3))
	td.Set(K("y"), tensor.Ones(tensor.Int64, 3))
	td.Set(K("m"), tensor.Ones(tensor.Bool, 3))
	return td
}

func seedNonTensor(f testing.TB) *TensorDict {
	td := New(3)
	td.Set(K("a"), tensor.Ones(tensor.Float32, 3))
	td.SetNonTensor(K("label"), map[string]any{"s": "h\u00e9\"llo", "n": []any{1, 2.5, nil, true}})
	td.Set(K("c"), tensor.Full(tensor.Float32, 2, 3, 2))
	td.SetTD(K("empty"), New(3, 1))
	return td.Lock()
}

// FuzzFromConsolidated feeds arbitrary metadata and storage sizes to
// FromConsolidated. It must return an error or a TensorDict whose metadata
// reads back the same, never panic.
func FuzzFromConsolidated(f *testing.F) {
	addSeeds(f, func(meta []byte, n int) { f.Add(meta, uint16(n)) })
	f.Fuzz(func(t *testing.T, meta []byte, stLen uint16) {
		st := tensor.NewStorage(int(stLen))
		td, err := FromConsolidated(st, meta, fuzzLimits...)
		if err != nil {
			return
		}
		checkRebuilt(t, td)
	})
}

// checkRebuilt checks invariants of a TensorDict that FromConsolidated
// accepted.
func checkRebuilt(t *testing.T, td *TensorDict) {
	_ = td.String()
	_ = td.Keys(IncludeNested(), Sorted())
	if !td.IsConsolidated() {
		return // e.g. leaves out of depth-first order; still valid
	}
	meta, err := td.ConsolidatedMetadata()
	if err != nil {
		t.Fatalf("ConsolidatedMetadata of an accepted input: %v", err)
	}
	back, err := FromConsolidated(td.ConsolidatedStorage(), meta)
	if err != nil {
		t.Fatalf("re-reading our own metadata: %v\n%s", err, meta)
	}
	if err := DiffStructure(td, back); err != nil {
		t.Fatalf("round trip changed the structure: %v", err)
	}
	for _, it := range td.Items(IncludeNested()) {
		if !it.IsNonTensor {
			continue
		}
		v, err := back.GetNonTensor(it.Key)
		if err != nil || !equalValues(v, it.Value) {
			t.Fatalf("round trip changed non-tensor %v: %v, %v", it.Key, v, err)
		}
	}
	if h, err := StructureHash(meta); err != nil || h != td.Signature() {
		t.Fatalf("StructureHash %x, %v; Signature %x", h, err, td.Signature())
	}
}

// FuzzLoadConsolidated writes arbitrary bytes as a consolidated file and
// loads it.
func FuzzLoadConsolidated(f *testing.F) {
	addSeeds(f, func(meta []byte, n int) {
		f.Add(pythonFile(make([]byte, n), string(meta)))
	})
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	dir := fuzzDir(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.td")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		td, err := LoadConsolidated(path, fuzzLimits...)
		if err != nil {
			return
		}
		defer td.Release()
		checkRebuilt(t, td)
	})
}

// fuzzDir returns a scratch folder for fuzz inputs, in memory (/dev/shm) when
// the system has one: every input is written to a file, and a busy disk
// would otherwise set the pace.
func fuzzDir(f *testing.F) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "tdfuzz"); err == nil {
			f.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return f.TempDir()
}
