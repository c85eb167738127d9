package tensordict

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// pythonFile builds a consolidated file the way Python tensordict's
// consolidate(filename=...) lays it out (§2.5): storage, JSON, int64 LE length.
func pythonFile(storage []byte, meta string) []byte {
	out := append(append([]byte(nil), storage...), meta...)
	return binary.LittleEndian.AppendUint64(out, uint64(len(meta)))
}

func TestSaveLoadConsolidated(t *testing.T) {
	dir := t.TempDir()
	td := New(3)
	require.NoError(t, td.Set(K("x"), arange(t, 3)))
	require.NoError(t, td.Set(K("n", "y"), tensor.Full(tensor.Int64, -5, 3, 2)))
	require.NoError(t, td.SetNonTensor(K("label"), map[string]any{"k": []any{"v", 1.5}}))
	ex, err := td.Expand(2, 3) // non-contiguous leaves are streamed correctly
	require.NoError(t, err)

	for name, src := range map[string]*TensorDict{"plain": ex, "consolidated": mustConsolidate(t, ex)} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".td")
			require.NoError(t, src.SaveConsolidated(path))
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			c := mustConsolidate(t, ex)
			meta, err := c.ConsolidatedMetadata()
			require.NoError(t, err)
			assert.Equal(t, pythonFile(c.ConsolidatedStorage().Bytes(), string(meta)), raw, "byte-exact file")

			got, err := LoadConsolidated(path)
			require.NoError(t, err)
			defer func() { require.NoError(t, got.Release()) }()
			assert.True(t, got.IsConsolidated())
			assert.True(t, got.ConsolidatedStorage().External(), "the file is mapped")
			eq, err := got.Eq(ex)
			require.NoError(t, err)
			assert.True(t, eq.All())
			lbl, err := got.GetNonTensor(K("label"))
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"k": []any{"v", 1.5}}, lbl)

			// Private mapping: writing a leaf does not change the file.
			require.NoError(t, got.SetInPlace(K("x"), tensor.Zeros(tensor.Float32, 2, 3)))
			again, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, raw, again)
		})
	}
	matches, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	assert.Empty(t, matches, "no temporary files left")
}

func mustConsolidate(t testing.TB, td *TensorDict) *TensorDict {
	t.Helper()
	c, err := td.Consolidate()
	require.NoError(t, err)
	return c
}

func TestLoadPythonFile(t *testing.T) {
	// The seed TensorDict as Python's json.dumps writes it (", " and ": "
	// separators), plus the transport extras a metadata dict may carry.
	cm := `{"device": null, "names": [null, null], "batch_size": [1, 2], "is_locked": false}`
	meta := `{"cls": "TensorDict", "non_tensors": {"note": ["h\u00e9llo", [1, 2], null]}, ` +
		`"leaves": {"c": ["torch.float32", [1, 2], 8, 16, 0]}, "cls_metadata": ` + cm + `, ` +
		`"a": {"cls": "TensorDict", "non_tensors": {}, "leaves": {"b": ["torch.float32", [1, 2], 0, 8, 0]}, "cls_metadata": ` + cm + `}, ` +
		`"d": {"cls": "TensorDict", "non_tensors": {}, "leaves": {}, "cls_metadata": ` + cm + `, ` +
		`"e": {"cls": "TensorDict", "non_tensors": {}, "leaves": {"f": ["torch.float32", [1, 2, 2], 16, 32, 0]}, "cls_metadata": ` + cm + `}}, ` +
		`"_total_bytes": 32, "_storage_device": "cpu", "_max_bytes": 32, "size": [1, 2], "_tensorclass_type": "tensordict.testing.MyDistData"}`
	storage := make([]byte, 32)
	for i := 0; i < 32; i += 4 {
		binary.LittleEndian.PutUint32(storage[i:], 0x3f800000) // float32 1
	}
	path := filepath.Join(t.TempDir(), "py.td")
	require.NoError(t, os.WriteFile(path, pythonFile(storage, meta), 0o644))

	td, err := LoadConsolidated(path)
	require.NoError(t, err)
	defer td.Release()
	assert.Equal(t, []Key{K("note"), K("a"), K("c"), K("d")}, td.Keys())
	assert.Equal(t, []Key{K("note"), K("a"), K("a", "b"), K("c"), K("d"), K("d", "e"), K("d", "e", "f")}, td.Keys(IncludeNested()))
	assert.True(t, td.EqScalar(1).All() == false, "the non-tensor entry is not 1")
	assert.True(t, td.Exclude(K("note")).EqScalar(1).All())
	assert.Equal(t, "tensordict.testing.MyDistData", td.ClassName())
	note, _ := td.GetNonTensor(K("note"))
	assert.Equal(t, "héllo", note)
	assert.True(t, td.IsConsolidated())
	f, _ := td.Get(K("d", "e", "f"))
	assert.Equal(t, []int{1, 2, 2}, f.Shape())
	assert.Equal(t, 16, f.Offset())
	out, err := td.ConsolidatedMetadata()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "_total_bytes")
	assert.Equal(t, seedTD(t).Exclude().Signature(), td.Signature())
}

func TestLoadConsolidatedErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"dir", dir, "not a regular file"},
		{"short", write("short", []byte{1, 2, 3}), "too short"},
		{"length too big", write("big", binary.LittleEndian.AppendUint64(nil, 1<<40)), "exceeds"},
		{"bad json", write("json", pythonFile(nil, `{"cls": `)), "end of JSON"},
		{"leaf outside", write("outside", pythonFile(make([]byte, 8), `{"cls":"TensorDict","non_tensors":{},"leaves":{"x":["torch.int64",[2],0,16,0]},"cls_metadata":{"batch_size":[]}}`)), "outside the storage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConsolidated(tc.path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFromConsolidatedErrors(t *testing.T) {
	node := func(leaves, extra string) string {
		return `{"cls":"TensorDict","non_tensors":{},"leaves":{` + leaves + `},"cls_metadata":{"device":null,"names":[null],"batch_size":[2],"is_locked":false}` + extra + `}`
	}
	st := tensor.NewStorage(64)
	tests := []struct {
		name string
		meta string
		opts []ConsolidatedOption
		want string
	}{
		{"ok", node(`"x":["torch.float32",[2],0,8,0]`, ""), nil, ""},
		{"not json", `nope`, nil, "want '{'"},
		{"trailing", node("", "") + "x", nil, "trailing data"},
		{"lazy stack", `{"cls":"LazyStackedTensorDict","cls_metadata":{}}`, nil, `class "LazyStackedTensorDict" is not supported`},
		{"no cls", `{"non_tensors":{},"leaves":{},"cls_metadata":{"batch_size":[]}}`, nil, `no "cls"`},
		{"no cls_metadata", `{"cls":"TensorDict"}`, nil, `no "cls_metadata"`},
		{"no batch", `{"cls":"TensorDict","cls_metadata":{}}`, nil, "no batch_size"},
		{"dtype", node(`"x":["torch.quint8",[2],0,8,0]`, ""), nil, `leaf x: unsupported dtype "torch.quint8"`},
		{"overflow", node(`"x":["torch.float32",[2,4611686018427387904,4611686018427387904],0,8,0]`, ""), nil, "overflows"},
		{"negative dim", node(`"x":["torch.float32",[2,-1],0,8,0]`, ""), nil, "negative"},
		{"float dim", node(`"x":["torch.float32",[2.5],0,8,0]`, ""), nil, "want an integer"},
		{"huge int", node(`"x":["torch.float32",[2],0,99999999999999999999999,0]`, ""), nil, "out of range"},
		{"size mismatch", node(`"x":["torch.float32",[2],0,16,0]`, ""), nil, "leaf x: byte range [0, 16) holds 16 bytes, float32[2] needs 8 + pad 0"},
		{"pad", node(`"x":["torch.float32",[2],0,16,8]`, ""), nil, "pad 8"},
		{"outside", node(`"x":["torch.float32",[2],64,72,0]`, ""), nil, "outside the storage of 64 bytes"},
		{"negative start", node(`"x":["torch.float32",[2],-8,0,0]`, ""), nil, "bad byte range"},
		{"overlap", node(`"x":["torch.float32",[2],0,8,0],"y":["torch.float32",[2,2],0,16,0]`, ""), nil, "overlap"},
		{"overlap nested", node(`"x":["torch.float32",[2],8,16,0]`, `,"n":`+node(`"y":["torch.float32",[2,2],0,16,0]`, "")), nil, "leaf x bytes [8, 16) overlap leaf n.y bytes [0, 16)"},
		{"misaligned", node(`"x":["torch.int64",[2],4,20,0]`, ""), nil, "leaf x: tensor: FromStorage: offset 4"},
		{"batch", node(`"x":["torch.float32",[3],0,16,4]`, ""), nil, "leaf x: shape [3] does not start with batch size [2]"},
		{"child batch", node("", `,"n":{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"batch_size":[3]}}`), nil, "key n: batch size [3] does not start with parent batch size [2]"},
		{"names", `{"cls":"TensorDict","cls_metadata":{"names":[null],"batch_size":[]}}`, nil, "1 names"},
		{"duplicate", node(`"x":["torch.float32",[2],0,8,0]`, `,"x":`+node("", "")), nil, "key x: defined twice"},
		{"ragged", node(`"x":["torch.float32",[2],0,8,0,1]`, ""), nil, "ragged"},
		{"short leaf", node(`"x":["torch.float32",[2],0,8]`, ""), nil, "4 fields"},
		{"extras only at top", node("", `,"n":`+node("", `,"_total_bytes":3`)), nil, "key n._total_bytes"},
		{"deep", strings.Repeat(`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"n":`, 10) + "{}" + strings.Repeat("}", 10), []ConsolidatedOption{WithMaxDepth(5)}, "nesting deeper than 5"},
		{"deep value", `{"cls":"TensorDict","non_tensors":{"v":[` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `,[],null]},"cls_metadata":{"batch_size":[]}}`, nil, "nesting deeper than 1000"},
		{"value ok", `{"cls":"TensorDict","non_tensors":{"v":[[[1,{"a":null}]],[],null]},"cls_metadata":{"batch_size":[]}}`, nil, ""},
		{"entries", node(`"x":["torch.float32",[2],0,8,0],"y":["torch.float32",[2],8,16,0],"z":["torch.float32",[2],16,24,0]`, ""), []ConsolidatedOption{WithMaxEntries(2)}, "key z: more than 2 entries"},
		{"size", node("", ""), []ConsolidatedOption{WithMaxMetadataBytes(10)}, "limit 10"},
		{"bad string", "{\"cls\":\"Tensor\xffDict\"}", nil, "UTF-8"},
		{"control char", "{\"cls\":\"a\nb\"}", nil, "control character"},
		{"non-tensor fields", node("", "")[:20] + `"non_tensors":{"s":["v",[2],null,4]},"cls_metadata":{"batch_size":[]}}`, nil, "non-tensor s: more than 3 fields"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td, err := FromConsolidated(st, []byte(tc.meta), tc.opts...)
			if tc.want == "" {
				require.NoError(t, err)
				require.NotNil(t, td)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := FromConsolidated(nil, []byte(node("", "")))
	assert.Error(t, err)
}

func TestConsolidationEnds(t *testing.T) {
	td := seedTD(t)
	c := mustConsolidate(t, td)
	require.True(t, c.IsConsolidated())
	sub, _ := c.GetTD(K("d"))
	assert.True(t, sub.IsConsolidated(), "nested levels share the storage")

	// SetInPlace keeps consolidation, replacing a leaf ends it.
	require.NoError(t, c.SetInPlace(K("c"), tensor.Full(tensor.Float32, 3, 1, 2)))
	assert.True(t, c.IsConsolidated())
	assert.Equal(t, []byte{0, 0, 0x40, 0x40}, c.ConsolidatedStorage().Bytes()[8:12])
	require.NoError(t, c.Set(K("d", "e", "g"), tensor.Ones(tensor.Int8, 1, 2)))
	assert.False(t, c.IsConsolidated())
	assert.Nil(t, c.ConsolidatedStorage())
	_, err := c.ConsolidatedMetadata()
	assert.Error(t, err)
	require.NoError(t, c.Del(K("d", "e", "g")))
	assert.True(t, c.IsConsolidated(), "the leaves still pack the storage")
	require.NoError(t, c.Del(K("a")))
	assert.True(t, c.IsConsolidated(), "a gap is allowed")
	m, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	back, err := FromConsolidated(c.ConsolidatedStorage(), m)
	require.NoError(t, err)
	assert.Equal(t, c.Keys(IncludeNested()), back.Keys(IncludeNested()))

	// Reserved names cannot be nested TensorDicts.
	bad := New()
	require.NoError(t, bad.Set(K("leaves", "x"), tensor.Ones(tensor.Int8)))
	_, _, err = Layout(bad)
	assert.ErrorContains(t, err, "reserved")
	// Empty TensorDict.
	e := mustConsolidate(t, New(4))
	assert.Equal(t, 0, e.ConsolidatedStorage().Len())
	// Wrong buffer for ConsolidateInto.
	_, err = td.ConsolidateInto(make([]byte, 8))
	assert.ErrorContains(t, err, "layout needs 32")
}
