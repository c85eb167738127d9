package memmapdir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// fixture is the golden directory Python tensordict wrote.
var fixture = filepath.Join("..", "..", "testdata", "tensordict", "mmap_example")

func TestReadFixtureMeta(t *testing.T) {
	root, err := ReadMeta(filepath.Join(fixture, MetaFile))
	require.NoError(t, err)
	td, err := root.TensorDict()
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1}, td.BatchSize)
	assert.Equal(t, "cpu", td.Device)
	assert.Equal(t, []Entry{{Key: "nested", Kind: KindTensorDict}}, td.Entries)

	nm, err := ReadMeta(filepath.Join(fixture, "nested", MetaFile))
	require.NoError(t, err)
	nested, err := nm.TensorDict()
	require.NoError(t, err)
	assert.Equal(t, []Entry{
		{Key: "int64", Leaf: &Leaf{Device: "cpu", Shape: []int{2, 1}, DType: tensor.Int64}},
		{Key: "string", Kind: KindNonTensorData},
		{Key: "bfloat16", Leaf: &Leaf{Device: "cpu", Shape: []int{2, 1}, DType: tensor.BFloat16}},
	}, nested.Entries)

	sm, err := ReadMeta(filepath.Join(fixture, "nested", "string", MetaFile))
	require.NoError(t, err)
	nt, err := sm.NonTensor()
	require.NoError(t, err)
	v, err := DecodeData(nt.Data)
	require.NoError(t, err)
	assert.Equal(t, []any{"a string!"}, v)
}

// TestMarshalMatchesFixture re-writes every meta.json of the fixture and
// compares the bytes: the writer follows tensordict field for field.
func TestMarshalMatchesFixture(t *testing.T) {
	for _, rel := range []string{MetaFile, "nested/" + MetaFile, "nested/string/" + MetaFile} {
		t.Run(rel, func(t *testing.T) {
			path := filepath.Join(fixture, rel)
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			m, err := ReadMeta(path)
			require.NoError(t, err)
			var got []byte
			if m.Type == TypeTensorDict {
				td, err := m.TensorDict()
				require.NoError(t, err)
				got, err = td.Marshal()
				require.NoError(t, err)
			} else {
				nt, err := m.NonTensor()
				require.NoError(t, err)
				got, err = nt.Marshal()
				require.NoError(t, err)
			}
			// The artifact files end with a newline that tensordict's
			// _save_metadata does not write; the rest matches byte for byte.
			assert.Equal(t, strings.TrimSuffix(string(want), "\n"), string(got))
		})
	}
}

// TestMarshalSpecExample writes the worked example of the reference (a
// nested TensorDict with batch size [2]) and compares it with golden files.
func TestMarshalSpecExample(t *testing.T) {
	root := &TensorDictMeta{
		Entries: []Entry{
			{Key: "obs", Leaf: &Leaf{Device: "cpu", Shape: []int{2, 3}, DType: tensor.Float32}},
			{Key: "nested", Kind: KindTensorDict},
		},
		BatchSize: []int{2}, Device: "cpu",
	}
	nested := &TensorDictMeta{
		Entries: []Entry{
			{Key: "reward", Leaf: &Leaf{Device: "cpu", Shape: []int{2, 1}, DType: tensor.Int64}},
			{Key: "label", Kind: KindNonTensorData},
		},
		BatchSize: []int{2}, Device: "cpu",
	}
	label := &NonTensorMeta{Data: json.RawMessage(`"hello"`)}
	for name, m := range map[string]interface{ Marshal() ([]byte, error) }{
		"spec_root.json": root, "spec_nested.json": nested, "spec_label.json": label,
	} {
		got, err := m.Marshal()
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		assert.Equal(t, strings.TrimSuffix(string(want), "\n"), string(got), name)
	}
}

func TestParseMetaWhitespaceAndOrder(t *testing.T) {
	compact := `{"b":{"type":"TensorDict"},"a":{"device":"cpu","shape":[3],"dtype":"torch.float64","is_nested":false},"shape":[3],"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"}`
	spaced := "{\n  \"b\" : { \"type\" : \"TensorDict\" } ,\n \"a\": {\"dtype\": \"torch.float64\", \"shape\": [ 3 ], \"device\": \"cpu\", \"is_nested\": false}, \"shape\": [3], \"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"\n}\n"
	for _, text := range []string{compact, spaced} {
		m, err := ParseMeta([]byte(text))
		require.NoError(t, err)
		td, err := m.TensorDict()
		require.NoError(t, err)
		require.Len(t, td.Entries, 2)
		assert.Equal(t, "b", td.Entries[0].Key)
		assert.Equal(t, "a", td.Entries[1].Key)
		assert.Equal(t, tensor.Float64, td.Entries[1].Leaf.DType)
		assert.Equal(t, []int{3}, td.BatchSize)
	}
}

func TestParseMetaErrors(t *testing.T) {
	const ty = `"_type": "<class 'tensordict._td.TensorDict'>"`
	for _, tc := range []struct{ name, text, want string }{
		{"not json", `{"a": `, "bad JSON"},
		{"array", `[1, 2]`, "not an object"},
		{"trailing", `{} {}`, "trailing"},
		{"duplicate", `{"a": 1, "a": 2}`, "duplicate"},
		{"type not string", `{"_type": 3}`, "_type"},
		{"wrong type", `{"_type": "x"}`, "not a TensorDict"},
		{"unknown dtype", `{"a": {"shape": [1], "dtype": "torch.qint8"}, ` + ty + `}`, `unsupported dtype "torch.qint8"`},
		{"negative dim", `{"a": {"shape": [-1], "dtype": "torch.int8"}, ` + ty + `}`, "not a non-negative integer"},
		{"float dim", `{"a": {"shape": [1.5], "dtype": "torch.int8"}, ` + ty + `}`, "not a non-negative integer"},
		{"shape not list", `{"a": {"shape": 3, "dtype": "torch.int8"}, ` + ty + `}`, "not a list"},
		{"overflow", `{"a": {"shape": [4294967296, 4294967296], "dtype": "torch.int8"}, ` + ty + `}`, "overflows"},
		{"bytes overflow", `{"a": {"shape": [2305843009213693952, 2], "dtype": "torch.int64"}, ` + ty + `}`, "overflows"},
		{"incomplete", `{"a": {"shape": [1]}, ` + ty + `}`, "neither"},
		{"bad batch", `{"shape": "x", ` + ty + `}`, "batch size"},
		{"bad device", `{"device": 1, ` + ty + `}`, "device"},
		{"too many dims", `{"a": {"shape": [` + strings.Repeat("1, ", 70) + `1], "dtype": "torch.int8"}, ` + ty + `}`, "dimensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeta([]byte(tc.text))
			if err == nil {
				_, err = m.TensorDict()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReadMetaLimits(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(100<<20))
	require.NoError(t, f.Close())
	_, err = ReadMeta(big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), big)
	assert.Contains(t, err.Error(), "limit")

	link := filepath.Join(dir, "link.json")
	require.NoError(t, os.Symlink(filepath.Join(fixture, MetaFile), link))
	_, err = ReadMeta(link)
	assert.ErrorContains(t, err, "symbolic link")

	_, err = ReadMeta(dir)
	assert.ErrorContains(t, err, "not a regular file")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{oops"), 0o644))
	_, err = ReadMeta(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad)
}

func TestMarshalRejects(t *testing.T) {
	for _, key := range []string{"shape", "device", "_type"} {
		_, err := (&TensorDictMeta{Entries: []Entry{{Key: key, Kind: KindTensorDict}}}).Marshal()
		assert.ErrorContains(t, err, "collides", key)
	}
	_, err := (&TensorDictMeta{Entries: []Entry{{Key: "a", Kind: "TensorDict"}, {Key: "a", Kind: "TensorDict"}}}).Marshal()
	assert.ErrorContains(t, err, "duplicate")
	_, err = (&TensorDictMeta{Entries: []Entry{{Key: "a"}}}).Marshal()
	assert.ErrorContains(t, err, "neither")
}

func TestMarshalNoneDeviceAndEscapes(t *testing.T) {
	td := &TensorDictMeta{Entries: []Entry{{Key: "é \"q\"\n", Kind: KindTensorDict}}, BatchSize: []int{}}
	b, err := td.Marshal()
	require.NoError(t, err)
	assert.Equal(t, `{"\u00e9 \"q\"\n": {"type": "TensorDict"}, "shape": [], "device": "None", "_type": "<class 'tensordict._td.TensorDict'>"}`, string(b))
	m, err := ParseMeta(b)
	require.NoError(t, err)
	back, err := m.TensorDict()
	require.NoError(t, err)
	assert.Equal(t, "", back.Device)
	assert.Equal(t, "é \"q\"\n", back.Entries[0].Key)
}

func TestWriteMetaAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, MetaFile)
	require.NoError(t, WriteMeta(path, []byte(`{"a": 1}`)))
	require.NoError(t, WriteMeta(path, []byte(`{"a": 2}`)))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"a": 2}`, string(got))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file is left behind")

	link := filepath.Join(dir, "l.json")
	require.NoError(t, os.Symlink(path, link))
	assert.ErrorContains(t, WriteMeta(link, []byte("{}")), "symbolic link")
}

func FuzzReadMeta(f *testing.F) {
	for _, rel := range []string{MetaFile, "nested/" + MetaFile, "nested/string/" + MetaFile} {
		b, err := os.ReadFile(filepath.Join(fixture, rel))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"a": {"shape": [1e3], "dtype": "torch.int8"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeta(data)
		if err != nil {
			return
		}
		if td, err := m.TensorDict(); err == nil {
			// Whatever parses re-marshals and parses back to the same thing,
			// unless it holds keys the writer refuses.
			out, err := td.Marshal()
			if err != nil {
				return
			}
			m2, err := ParseMeta(out)
			if err != nil {
				t.Fatalf("re-marshalled meta does not parse: %v\n%s", err, out)
			}
			td2, err := m2.TensorDict()
			if err != nil {
				t.Fatalf("re-marshalled meta is not a TensorDict: %v\n%s", err, out)
			}
			if len(td2.Entries) != len(td.Entries) {
				t.Fatalf("entries changed: %d then %d", len(td.Entries), len(td2.Entries))
			}
			for _, e := range td.Entries {
				if e.Leaf != nil {
					if _, err := tensor.NBytesOf(e.Leaf.DType, e.Leaf.Shape); err != nil {
						t.Fatalf("accepted a leaf with a bad shape: %v", err)
					}
				}
			}
		}
		if nt, err := m.NonTensor(); err == nil && nt.Data != nil {
			if _, err := nt.Marshal(); err != nil {
				t.Fatalf("NonTensor data does not re-marshal: %v", err)
			}
		}
	})
}

func TestNonTensorStackMeta(t *testing.T) {
	// The exact string of tensordict's test_nontensor.py.
	const python = `{"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,"data":[[0,1],[0,1],[0,1]]}`
	m, err := ParseMeta([]byte(python))
	require.NoError(t, err)
	sm, err := m.NonTensorStack()
	require.NoError(t, err)
	assert.Equal(t, 0, sm.StackDim)
	assert.Equal(t, "", sm.Device)
	assert.Equal(t, `[[0,1],[0,1],[0,1]]`, string(sm.Data))
	got, err := sm.Marshal()
	require.NoError(t, err)
	assert.Equal(t, python, string(got))

	spaced := &NonTensorStackMeta{StackDim: 1, Device: "cpu", Data: json.RawMessage(`[ "a, b" , {"k": "é"} ]`)}
	got, err = spaced.Marshal()
	require.NoError(t, err)
	assert.Equal(t, `{"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":1,"device":"cpu","data":["a, b",{"k":"é"}]}`, string(got))

	for _, tc := range []struct{ name, text, want string }{
		{"wrong type", `{"_type": "<class 'tensordict.tensorclass.NonTensorData'>"}`, "not NonTensorStack"},
		{"negative stack_dim", `{"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": -1}`, "stack_dim -1"},
		{"float stack_dim", `{"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": 0.5}`, "stack_dim 0.5"},
		{"bad device", `{"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "device": 3}`, "device 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeta([]byte(tc.text))
			require.NoError(t, err)
			_, err = m.NonTensorStack()
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err = (&NonTensorStackMeta{Data: json.RawMessage(`[1,`)}).Marshal()
	assert.ErrorContains(t, err, "NonTensorStack data")
}
