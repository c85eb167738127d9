package tensordict

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// The metadata writer and the TensorDict side of the reader are held to a
// golden corpus: internal/codec/testdata/golden/NAME.json is Layout of the
// corpus TensorDict NAME, byte for byte (the codec's own tests decode the
// same files against an encoding/json oracle), and testdata/meta/NAME.dump
// is what FromConsolidated rebuilds from it. Run with -update to rewrite
// them after a deliberate change of the format, and review the diff.

var update = flag.Bool("update", false, "rewrite the golden metadata files")

// golden compares got with the file path, or writes it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test -run %s -update", t.Name())
	assert.Equal(t, string(want), got, "%s", path)
}

// dumpTD writes everything about td that FromConsolidated decides: entry
// order and kinds, dtypes, shapes, offsets, values, batch sizes, locks,
// class and consolidation ranges.
func dumpTD(td *TensorDict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "class=%q ", td.class)
	var walk func(td *TensorDict, indent string)
	walk = func(td *TensorDict, indent string) {
		fmt.Fprintf(&b, "%sbatch=%v locked=%v", indent, td.batch, td.locked)
		if td.cons != nil {
			fmt.Fprintf(&b, " cons=[%d,%d)", td.cons.base, td.cons.end)
		}
		b.WriteByte('\n')
		for i, e := range td.entries {
			if j, ok := td.lookup(e.name); !ok || j != i {
				fmt.Fprintf(&b, "%s BAD INDEX %q\n", indent, e.name)
			}
			switch e.kind {
			case kindTensor:
				fmt.Fprintf(&b, "%s %q %v%v @%d\n", indent, e.name, e.t.DType(), e.t.Shape(), e.t.Offset())
			case kindNonTensor:
				fmt.Fprintf(&b, "%s %q = %#v\n", indent, e.name, e.v)
			case kindTD:
				fmt.Fprintf(&b, "%s %q:\n", indent, e.name)
				walk(e.td, indent+"  ")
			}
		}
	}
	walk(td, "")
	return b.String()
}

// metaCorpus is TensorDicts whose metadata exercises every part of the
// encoder: nesting, non-tensor values, escapes, empty levels, zero-size
// leaves, every dtype, locks, and the TensorDict of the Python-written
// memmap fixture.
func metaCorpus(t testing.TB) map[string]*TensorDict {
	c := map[string]*TensorDict{"seed": seedTD(t)}
	td := New(3)
	require.NoError(t, td.Set(K("x"), tensor.Ones(tensor.Float32, 3)))
	require.NoError(t, td.SetNonTensor(K("label"), map[string]any{"s": "h\u00e9\"llo\n\x01", "n": []any{int64(1), 2.5, nil, true, 1e300, math.Copysign(0, -1)}}))
	require.NoError(t, td.Set(K("n", "y"), tensor.Ones(tensor.Int64, 3, 0)))
	require.NoError(t, td.SetTD(K("empty"), New(3, 1)))
	require.NoError(t, td.SetNonTensor(K("n", "s"), "v"))
	require.NoError(t, td.Set(K("z\"\\\t", "\u2603"), tensor.Ones(tensor.Bool, 3, 5)))
	c["mixed"] = td.Lock()
	dts := New()
	for i, dt := range []tensor.DType{tensor.Bool, tensor.Uint8, tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64,
		tensor.Float16, tensor.BFloat16, tensor.Float32, tensor.Float64, tensor.Complex64, tensor.Complex128} {
		require.NoError(t, dts.Set(K(fmt.Sprintf("d%d", i%3), dt.String()), tensor.Zeros(dt, i+1)))
	}
	c["dtypes"] = dts
	deep := New(1)
	k := K()
	for i := range 40 {
		k = append(k, fmt.Sprintf("l%d", i))
		require.NoError(t, deep.Set(append(append(Key{}, k...), "v"), tensor.Ones(tensor.Int8, 1, i)))
	}
	c["deep"] = deep
	c["empty"] = New(4, 2)
	many, _ := manyLeaves(t, 700)
	c["many"] = many
	py, err := LoadMemmap("../testdata/tensordict/mmap_example")
	require.NoError(t, err)
	c["python_mmap_example"] = py
	return c
}

func TestMetaEncodeGolden(t *testing.T) {
	for name, td := range metaCorpus(t) {
		t.Run(name, func(t *testing.T) {
			got, gotN, err := Layout(td)
			require.NoError(t, err)
			golden(t, filepath.Join("..", "internal", "codec", "testdata", "golden", name+".json"), string(got))

			c, err := td.Consolidate()
			require.NoError(t, err)
			assert.Equal(t, gotN, c.ConsolidatedStorage().Len())
			cm, err := c.ConsolidatedMetadata()
			require.NoError(t, err)
			assert.Equal(t, string(got), string(cm), "ConsolidatedMetadata vs Layout")

			back, err := FromConsolidated(c.ConsolidatedStorage(), got)
			require.NoError(t, err)
			golden(t, filepath.Join("testdata", "meta", name+".dump"), dumpTD(back))
			require.NoError(t, DiffStructure(td, back))
			h, err := StructureHash(got)
			require.NoError(t, err)
			assert.Equal(t, td.Signature(), h)
			assert.Equal(t, structureOf(td).Hash(codec.StorageOrder), h)
			require.NoError(t, DiffStructureMeta(td, got))
		})
	}
}

func TestMetaEncodeErrors(t *testing.T) {
	r := New()
	require.NoError(t, r.Set(K("a", "leaves", "x"), tensor.Ones(tensor.Int8)))
	u := New()
	require.NoError(t, u.Set(K("ok", "b\xffad"), tensor.Ones(tensor.Int8)))
	rel := New()
	st := tensor.NewStorage(8)
	x, err := tensor.FromStorage(tensor.Int8, st, 0, 8)
	require.NoError(t, err)
	require.NoError(t, rel.Set(K("p", "q"), x))
	require.NoError(t, st.Release())
	deep := New()
	k := K()
	for i := range maxPlanDepth + 3 {
		k = append(k, fmt.Sprintf("l%d", i))
	}
	require.NoError(t, deep.Set(append(k, "v"), tensor.Ones(tensor.Int8)))
	nan := New()
	require.NoError(t, nan.SetNonTensor(K("n", "v"), 1.0))
	nt, err := nan.GetTD(K("n"))
	require.NoError(t, err)
	i, ok := nt.lookup("v")
	require.True(t, ok)
	nt.entries[i].v = math.NaN() // past SetNonTensor's check, as a bug would
	tests := []struct {
		name string
		td   *TensorDict
		want string
	}{
		{"reserved", r, "tensordict: Layout: nested tensordict a.leaves has a name reserved by the consolidated metadata"},
		{"utf8", u, "tensordict: Layout: key ok.b\xffad is not valid UTF-8"},
		{"released", rel, "tensordict: Layout: key p.q: storage was released"},
		{"deep", deep, "tensordict: Layout: key " + Key(k[:maxPlanDepth+1]).String() + ": nested deeper than 992 levels"},
		{"nan", nan, `tensordict: metadata: non-tensor "v": NaN is not representable in JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Layout(tt.td)
			assert.EqualError(t, err, tt.want)
		})
	}
}

// TestFromConsolidatedMessages pins the text of decoding errors as
// FromConsolidated reports them: what is wrong and where.
func TestFromConsolidatedMessages(t *testing.T) {
	const cm = `"cls_metadata":{"batch_size":[]}`
	tests := []struct {
		name, meta, want string
		limit            bool
	}{
		{"syntax", `nope`, "JSON offset 0: want '{', found 'n'", false},
		{"leaf", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8,5]},` + cm + `}`,
			"leaf a: byte range [0, 8) holds 8 bytes, int8[2] needs 2 + pad 5", false},
		{"nested leaf", `{"cls":"TensorDict",` + cm + `,"n":{"cls":"TensorDict",` + cm + `,"leaves":{"x":["torch.quint8",[],0,1,7]}}}`,
			"leaf n.x: unsupported dtype \"torch.quint8\"", false},
		{"no cls", `{` + cm + `,"n":{` + cm + `}}`, "key n: no \"cls\" field", false},
		{"overlap", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[8],0,8,0],"b":["torch.int8",[8],4,12,0]},` + cm + `}`,
			"leaf b bytes [4, 12) overlap leaf a bytes [0, 8)", false},
		{"outside", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[8],64,72,0]},` + cm + `}`,
			"leaf a: byte range [64, 72) is outside the storage of 64 bytes", false},
		{"duplicate", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[8],0,8,0],"a":["torch.int8",[8],8,16,0]},` + cm + `}`,
			"key a: defined twice", false},
		{"depth", strings.Repeat("[", 1001), "JSON offset 0: want '{', found '['", false},
		{"deep", `{"cls":"TensorDict",` + cm + `,"n":` + strings.Repeat(`{"x":`, 1000) + `{}` + strings.Repeat(`}`, 1001),
			"nesting deeper than 1000: " + ErrLimit.Error(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromConsolidated(tensor.NewStorage(64), []byte(tt.meta))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "tensordict: FromConsolidated: "), err.Error())
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, tt.limit, errors.Is(err, ErrLimit), err.Error())
		})
	}
}

// TestMetaDeepErrorIsShort checks that an error at the depth limit names
// the key once: its text grows with the depth, not with its square.
func TestMetaDeepErrorIsShort(t *testing.T) {
	for _, tail := range []string{`{}`, `{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"leaves":{"x":["torch.quint8",[],0,1,7]}}`} {
		const depth = 2000
		meta := `{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"n":` + strings.Repeat(`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"n":`, depth) + tail + strings.Repeat(`}`, depth+1)
		_, err := FromConsolidated(tensor.NewStorage(8), []byte(meta))
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 4*codec.DefaultMaxDepth+200, "error text of %d bytes", len(err.Error()))
		_, err = StructureHash([]byte(meta))
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 4*codec.DefaultMaxDepth+200, "error text of %d bytes", len(err.Error()))
	}
}

func TestAppendLayoutDoesNotAllocate(t *testing.T) {
	td := seedTD(t)
	want, wantN, err := Layout(td)
	require.NoError(t, err)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		got, n, err := appendLayout("Layout", buf[:0], td)
		if err != nil || n != wantN || string(got) != string(want) {
			t.Fatalf("appendLayout: %v, %d bytes, %s", err, n, got)
		}
	})
	assert.Zero(t, allocs)
	got, _, err := appendLayout("Layout", []byte("prefix"), td)
	require.NoError(t, err)
	assert.Equal(t, "prefix"+string(want), string(got))
	// A large TensorDict: the plan is not pooled, the result is the same.
	many, _ := manyLeaves(t, 300)
	p, err := makePlan("Layout", many, 0, false)
	require.NoError(t, err)
	want, err = encodeMetadata(p)
	require.NoError(t, err)
	got, _, err = appendLayout("Layout", nil, many)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	assert.Equal(t, 0., testing.AllocsPerRun(100, func() { _ = td.Signature() }), "Signature")
	c := mustConsolidate(t, td)
	assert.Equal(t, 0., testing.AllocsPerRun(100, func() { _ = c.IsConsolidated() }), "IsConsolidated")
}

// TestMetaKeyPartsBounded: the structure of metadata with many leaves deep
// down is refused before its keys are built.
func TestMetaKeyPartsBounded(t *testing.T) {
	const depth, leaves = 900, codec.MaxKeyParts/900 + 10
	var b strings.Builder
	node := `{"cls":"TensorDict","cls_metadata":{"batch_size":[]}`
	for range depth {
		b.WriteString(node + `,"n":`)
	}
	b.WriteString(`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"leaves":{`)
	for i := range leaves {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"l%d":["torch.int8",[0],0,0,0]`, i)
	}
	b.WriteString(`}}` + strings.Repeat("}", depth))
	meta := []byte(b.String())
	_, err := StructureHash(meta)
	assert.ErrorContains(t, err, "parts")
	assert.ErrorContains(t, DiffStructureMeta(New(), meta), "parts")
}
