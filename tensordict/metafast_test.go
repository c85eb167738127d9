package tensordict

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// The tests below hold the metadata code to the reference implementation in
// metafast_ref_test.go (the code before the fast paths): the same bytes
// out, the same TensorDicts and the same errors in.

func refLayout(td *TensorDict) ([]byte, int, error) {
	p, err := refMakePlan("Layout", td, 0, false)
	if err != nil {
		return nil, 0, err
	}
	meta, err := refEncodeMetadata(p)
	if err != nil {
		return nil, 0, err
	}
	return meta, p.total, nil
}

func refConsolidatedMetadata(td *TensorDict) ([]byte, error) {
	if !td.IsConsolidated() {
		return nil, fmt.Errorf("tensordict: ConsolidatedMetadata: tensordict is not consolidated")
	}
	p, err := refMakePlan("ConsolidatedMetadata", td, 0, true)
	if err != nil {
		return nil, err
	}
	return refEncodeMetadata(p)
}

func refFromConsolidated(st *tensor.Storage, meta []byte, opts ...ConsolidatedOption) (*TensorDict, error) {
	root, class, err := refDecodeMetadata(meta, st.Len(), newReadConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td, err := refBuildFromMeta(root, st)
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td.cons.base, td.cons.end = 0, st.Len()
	td.class = class
	return td, nil
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
// leaves, every dtype, locks.
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
	return c
}

func TestMetaEncodeMatchesReference(t *testing.T) {
	for name, td := range metaCorpus(t) {
		t.Run(name, func(t *testing.T) {
			want, wantN, err := refLayout(td)
			require.NoError(t, err)
			got, gotN, err := Layout(td)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			assert.Equal(t, wantN, gotN)
			assert.Equal(t, refStructureOf(td).hash(), td.Signature())
			assert.Equal(t, refStructureOf(td).hash(), structureOf(td).hash())

			c, err := td.Consolidate()
			require.NoError(t, err)
			want, err = refConsolidatedMetadata(c)
			require.NoError(t, err)
			got, err = c.ConsolidatedMetadata()
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))

			back, err := FromConsolidated(c.ConsolidatedStorage(), got)
			require.NoError(t, err)
			ref, err := refFromConsolidated(c.ConsolidatedStorage(), got)
			require.NoError(t, err)
			assert.Equal(t, dumpTD(ref), dumpTD(back))
			h, err := StructureHash(got)
			require.NoError(t, err)
			assert.Equal(t, td.Signature(), h)
			require.NoError(t, DiffStructureMeta(td, got))
		})
	}
}

func TestMetaEncodeErrorsMatchReference(t *testing.T) {
	bad := map[string]*TensorDict{}
	r := New()
	require.NoError(t, r.Set(K("a", "leaves", "x"), tensor.Ones(tensor.Int8)))
	bad["reserved"] = r
	u := New()
	require.NoError(t, u.Set(K("ok", "b\xffad"), tensor.Ones(tensor.Int8)))
	bad["utf8"] = u
	rel := New()
	st := tensor.NewStorage(8)
	x, err := tensor.FromStorage(tensor.Int8, st, 0, 8)
	require.NoError(t, err)
	require.NoError(t, rel.Set(K("p", "q"), x))
	require.NoError(t, st.Release())
	bad["released"] = rel
	deep := New()
	k := K()
	for i := range maxPlanDepth + 3 {
		k = append(k, fmt.Sprintf("l%d", i))
	}
	require.NoError(t, deep.Set(append(k, "v"), tensor.Ones(tensor.Int8)))
	bad["deep"] = deep
	for name, td := range bad {
		t.Run(name, func(t *testing.T) {
			_, _, want := refLayout(td)
			require.Error(t, want)
			_, _, got := Layout(td)
			require.Error(t, got)
			assert.Equal(t, strings.Replace(want.Error(), "tensordict: Layout", "", 1), strings.Replace(got.Error(), "tensordict: Layout", "", 1))
		})
	}
}

// checkDecodeMatchesReference decodes meta against a storage of stLen bytes
// with the reference and the fast code and fails unless both give the same
// error or the same TensorDict.
func checkDecodeMatchesReference(t *testing.T, meta []byte, stLen int, opts ...ConsolidatedOption) {
	st := tensor.NewStorage(stLen)
	ref, refErr := refFromConsolidated(st, meta, opts...)
	got, err := FromConsolidated(st, meta, opts...)
	if refErr != nil || err != nil {
		if refErr == nil || err == nil || !sameError(refErr, err) {
			t.Fatalf("errors differ:\nref: %v\ngot: %v\nmeta: %.300q", refErr, err, meta)
		}
	} else if a, b := dumpTD(ref), dumpTD(got); a != b {
		t.Fatalf("results differ:\nref:\n%s\ngot:\n%s\nmeta: %.300q", a, b, meta)
	}
	rs, refErr := refStructureOfMeta(meta)
	s, err := structureOfMeta(meta)
	_, hashErr := StructureHash(meta)
	if refErr != nil || err != nil || hashErr != nil {
		if refErr == nil || err == nil || hashErr == nil || !sameError(refErr, err) {
			t.Fatalf("structure errors differ:\nref: %v\ngot: %v\nhash: %v\nmeta: %.300q", refErr, err, hashErr, meta)
		}
		return
	}
	h, err := StructureHash(meta)
	if err != nil || h != rs.hash() {
		t.Fatalf("StructureHash %x, %v; reference %x\nmeta: %.300q", h, err, rs.hash(), meta)
	}
	if rs.hash() != s.hash() {
		t.Fatalf("structure hashes differ: %x vs %x\nmeta: %.300q", rs.hash(), s.hash(), meta)
	}
	if err := diff(structure{batch: rs.batch, leaves: refLeaves(rs)}, s); err != nil {
		t.Fatalf("structures differ: %v\nmeta: %.300q", err, meta)
	}
}

// sameError reports whether got says what ref says. The reference repeats
// the key of every enclosing node before an error in a nested node
// ("root: key n: key n.m: leaf n.m.x: ..."); the fast decoder names the
// innermost one only ("key n.m: leaf n.m.x: ...", or just "leaf n.m.x:
// ..." when the leaf's key says it all), so got must be ref with those
// repeated prefixes dropped.
func sameError(ref, got error) bool {
	const op = "tensordict: FromConsolidated: "
	r, g := ref.Error(), got.Error()
	// Limit errors now say so, for errors.Is(err, ErrLimit).
	if errors.Is(got, ErrLimit) {
		g = strings.TrimSuffix(g, ": "+ErrLimit.Error())
	}
	if strings.HasPrefix(r, op) != strings.HasPrefix(g, op) {
		return false
	}
	r, g = strings.TrimPrefix(r, op), strings.TrimPrefix(g, op)
	if r == g {
		return true
	}
	if !strings.HasSuffix(r, g) || !(strings.HasPrefix(g, "key ") || strings.HasPrefix(g, "leaf ")) {
		return false
	}
	// What was dropped is a chain of "root: " and "key ...: " prefixes.
	return strings.HasPrefix(r, "root: ") && strings.HasSuffix(r[:len(r)-len(g)], ": ")
}

func TestMetaDecodeMatchesReference(t *testing.T) {
	for _, td := range metaCorpus(t) {
		meta, n, err := Layout(td)
		require.NoError(t, err)
		checkDecodeMatchesReference(t, meta, n)
		checkDecodeMatchesReference(t, meta, max(n-1, 0))
		for i := 0; i < len(meta); i += 1 + len(meta)/200 {
			checkDecodeMatchesReference(t, meta[:i], n)
			mut := append([]byte(nil), meta...)
			mut[i] ^= 0x04
			checkDecodeMatchesReference(t, mut, n)
			checkDecodeMatchesReference(t, mut, n, WithMaxEntries(5), WithMaxDepth(4))
		}
	}
	// The error table of TestFromConsolidatedErrors, and a few more.
	for _, meta := range []string{
		`nope`, `{"cls":"TensorDict","cls_metadata":{"names":["a",null,3],"batch_size":[1,2]}}`,
		`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":"C","size":[1],"_total_bytes":8}`,
		`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":null}`,
		`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":3}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8,6]},"leaves":{"b":["torch.int8",[2],8,16,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8,6],"a":["torch.int8",[2],8,16,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","non_tensors":{"v":[{"a":1,"a":2},[],null]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","non_tensors":{"v":["\ud800\u0041\ud83d\ude00\/",[1],"cpu"]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","non_tensors":{"v":[1e999,[],null]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","non_tensors":{"v":[123456789012345678901234567890,[],null]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],-0,8,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],9223372036854775807,8,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],-9223372036854775808,8,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],999999999999999999,8,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],1000000000000000000,8,6]},"cls_metadata":{"batch_size":[]}}`,
		`{"\u0063ls":"TensorDict","cls_metadata":{"batch_size":[],"device":"cuda","is_locked":true,"x":{}}}`,
		` { "cls" : "TensorDict" , "cls_metadata" : { "batch_size" : [ 2 ] } , "n" : { "cls" : "TensorDict" , "cls_metadata" : { "batch_size" : [ 2 , 3 ] } } } `,
	} {
		checkDecodeMatchesReference(t, []byte(meta), 64)
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
		assert.Less(t, len(err.Error()), 4*defaultMaxDepth+200, "error text of %d bytes", len(err.Error()))
		_, err = StructureHash([]byte(meta))
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 4*defaultMaxDepth+200, "error text of %d bytes", len(err.Error()))
	}
}

// FuzzMetaDecodeMatchesReference checks the fast decoder against the
// reference on arbitrary input.
func FuzzMetaDecodeMatchesReference(f *testing.F) {
	addSeeds(f, func(meta []byte, n int) { f.Add(meta, uint16(n)) })
	f.Fuzz(func(t *testing.T, meta []byte, stLen uint16) {
		checkDecodeMatchesReference(t, meta, int(stLen), fuzzLimits...)
	})
}

func refLeaves(s refStructure) []structLeaf {
	out := make([]structLeaf, len(s.leaves))
	for i, l := range s.leaves {
		out[i] = structLeaf(l)
	}
	return out
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
	want, _, err = refLayout(many)
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
	const depth, leaves = 900, maxKeyParts/900 + 10
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
