package codec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// corpus returns the golden metadata (written by tensordict's
// TestMetaEncodeGolden, from its corpus and from the Python-written memmap
// fixture) and, as inputs the decoder must refuse, the Python-written
// meta.json files of the fixtures: name -> contents.
func corpus(t testing.TB) map[string][]byte {
	c := map[string][]byte{}
	add := func(pattern string) int {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			c[f] = b
		}
		return len(files)
	}
	require.NotZero(t, add("testdata/golden/*.json"), "no golden metadata: run tensordict's TestMetaEncodeGolden -update")
	require.NotZero(t, add("../../testdata/tensordict/mmap_example/*/*.json")+add("../../testdata/tensordict/mmap_example/*.json"))
	if add("/work/shared/fixtures/tensordict/mmap_example/*.json") == 0 {
		t.Log("the shared fixtures are absent here; the repository's copy of them is used")
	}
	return c
}

// tricky are inputs that exercise the corners of the format and of JSON.
var tricky = []string{
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[2,2]},"a":{"cls":"NonTensorStack","non_tensors":{"1":["s",[2],null]},"leaves":{},"cls_metadata":{"stack_dim":1},` +
		`"0":{"cls":"NonTensorStack","non_tensors":{"0":[1,[],null],"1":[[2],[],null]},"cls_metadata":{"stack_dim":0}}}}`,
	`nope`, ``, `{}`, `[]`, `{"cls":"TensorDict","cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[]}} x`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[]}} {}`,
	`{"cls":"TensorDict","cls_metadata":{"names":["a",null,3],"batch_size":[1,2]}}`,
	`{"cls":"TensorDict","cls_metadata":{"names":["a",null],"batch_size":[1,2]}}`,
	`{"cls":"TensorDict","cls_metadata":{"names":["a"],"batch_size":[1,2]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":"C","size":[1],"_total_bytes":8}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":null}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":3}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"n":{"cls":"TensorDict","cls_metadata":{"batch_size":[]},"_tensorclass_type":"C"}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8,6]},"leaves":{"b":["torch.int8",[2],8,16,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8,6],"a":["torch.int8",[2],8,16,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":[{"a":1,"a":2},[],null]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":["\ud800\u0041\ud83d\ude00\/",[1],"cpu"]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"":["\ud800\ud800"]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":["\ud800\ud800\udc00\udc00\ud83d\ude00\ud800",[],null]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":["\ud800\u00zz",[],null]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":[1e999,[],null]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":[123456789012345678901234567890,[],null]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":[],"w":[1],"x":[1,[2],null,4]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","non_tensors":{"v":[-0.0,[-1],null]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],-0,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0.0,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8,6,[1]]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],0,8]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["int8",[2],0,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],9223372036854775807,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],-9223372036854775808,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],999999999999999999,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[2],1000000000000000000,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[4611686018427387904,4],0,8,6]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[8],0,8,0],"b":["torch.int8",[0],4,4,0],"c":["torch.int8",[8],7,15,0]},"cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","leaves":{"a":["torch.int8",[3],0,8,5]},"cls_metadata":{"batch_size":[4]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[4]},"n":{"cls":"TensorDict","cls_metadata":{"batch_size":[3]}}}`,
	`{"\u0063ls":"TensorDict","cls_metadata":{"batch_size":[],"device":"cuda","is_locked":true,"x":{}}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[],"device":3}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[],"is_locked":1}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[],"is_locked":nul}}`,
	`{"cls":"TensorClass","cls_metadata":{"batch_size":[]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[01]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[1,]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[1.5]}}`,
	`{"cls":"TensorDict","cls_metadata":{"batch_size":[1e2]}}`,
	"{\"cls\":\"TensorDict\",\"cls_metadata\":{\"batch_size\":[]},\"a\x01\":{}}",
	"{\"cls\":\"TensorDict\",\"cls_metadata\":{\"batch_size\":[]},\"\xff\":{}}",
	` { "cls" : "TensorDict" , "cls_metadata" : { "batch_size" : [ 2 ] } , "n" : { "cls" : "TensorDict" , "cls_metadata" : { "batch_size" : [ 2 , 3 ] } } } `,
}

// checkOracle decodes meta with Decode and with the oracles (encoding/json's,
// and jsontext's with GOEXPERIMENT=jsonv2) and fails unless all refuse it
// or all give the same tree. It also checks that
// MetaHash and MetaStructure agree with Decode.
func checkOracle(t *testing.T, meta []byte, stLen int, lim Limits) {
	t.Helper()
	root, class, err := Decode(meta, stLen, lim)
	for i, alt := range alternatives {
		oroot, oclass, oerr := alt(meta, stLen, lim)
		switch {
		case err != nil && oerr != nil:
		case err != nil || oerr != nil:
			t.Fatalf("verdicts differ:\ndecode: %v\noracle %d: %v\nmeta: %.300q", err, i, oerr, meta)
		default:
			if a, b := dump(root, class), dump(oroot, oclass); a != b {
				t.Fatalf("trees differ:\ndecode:\n%s\noracle %d:\n%s\nmeta: %.300q", a, i, b, meta)
			}
		}
	}
	if lim != DefaultLimits() {
		return
	}
	h, herr := MetaHash(meta)
	s, serr := MetaStructure(meta)
	if (herr == nil) != (serr == nil) {
		t.Fatalf("MetaHash: %v, MetaStructure: %v", herr, serr)
	}
	if herr == nil && h != s.Hash(StorageOrder) {
		t.Fatalf("MetaHash %x, MetaStructure's hash %x", h, s.Hash(StorageOrder))
	}
}

func TestDecodeMatchesOracle(t *testing.T) {
	small := Limits{MaxDepth: 4, MaxEntries: 5, MaxMetadataBytes: 1 << 20}
	for name, meta := range corpus(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			root, _, err := Decode(meta, 1<<20, DefaultLimits())
			if strings.Contains(name, "golden") {
				require.NoError(t, err)
				n := 0
				for _, l := range new(Decoder).mustSorted(t, meta) {
					n = max(n, l.Stop)
				}
				checkOracle(t, meta, n, DefaultLimits())
				checkOracle(t, meta, max(n-1, 0), DefaultLimits())
				_ = root
			} else {
				require.Error(t, err, "a memmap meta.json is not consolidated metadata")
			}
			for i := 0; i < len(meta); i += 1 + len(meta)/200 {
				checkOracle(t, meta[:i], 1<<20, DefaultLimits())
				mut := append([]byte(nil), meta...)
				mut[i] ^= 0x04
				checkOracle(t, mut, 1<<20, DefaultLimits())
				checkOracle(t, mut, 1<<20, small)
			}
		})
	}
	for _, meta := range tricky {
		checkOracle(t, []byte(meta), 64, DefaultLimits())
		checkOracle(t, []byte(meta), 64, small)
	}
}

// mustSorted decodes meta with d and returns its leaves in storage order.
func (d *Decoder) mustSorted(t *testing.T, meta []byte) []*Leaf {
	_, _, err := d.Decode(meta, 1<<40, DefaultLimits())
	require.NoError(t, err)
	return d.Sorted()
}

// FuzzDecodeMatchesOracle checks Decode against the encoding/json oracle
// on arbitrary input.
func FuzzDecodeMatchesOracle(f *testing.F) {
	for _, meta := range corpus(f) {
		f.Add(meta, uint16(4096))
	}
	for _, meta := range tricky {
		f.Add([]byte(meta), uint16(64))
	}
	lim := Limits{MaxDepth: DefaultMaxDepth, MaxEntries: 4096, MaxMetadataBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, meta []byte, stLen uint16) {
		checkOracle(t, meta, int(stLen), lim)
	})
}

func TestDecodeErrors(t *testing.T) {
	const cm = `"cls_metadata":{"batch_size":[]}`
	tests := []struct {
		name, meta, want string
		limit            bool
	}{
		{"syntax", `{"cls":"TensorDict",}`, `root: JSON offset 20: want '"', found '}'`, false},
		{"eof", `{"cls":"TensorDict"`, "root: JSON offset 19: unexpected end of JSON", false},
		{"class", `{"cls":"Other",` + cm + `}`, `root: class "Other" is not supported (only TensorDict, and NonTensorStack below the root)`, false},
		{"no batch", `{"cls":"TensorDict","cls_metadata":{}}`, "root: cls_metadata has no batch_size", false},
		{"names", `{"cls":"TensorDict","cls_metadata":{"names":[null],"batch_size":[]}}`, "root: 1 names for batch size []", false},
		{"fields", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[1],0,8]},` + cm + `}`, "root: leaf a: 4 fields, want [dtype, shape, start, stop, pad]", false},
		{"ragged", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[1],0,8,7,[]]},` + cm + `}`, "root: leaf a: nested (ragged) tensors are not supported", false},
		{"negative", `{"cls":"TensorDict",` + cm + `,"n":{"cls":"TensorDict","cls_metadata":{"batch_size":[-1]}}}`, "key n: cls_metadata: JSON offset 109: batch size has negative entry -1", false},
		{"pad", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[0],0,8,8]},` + cm + `}`, "leaf a: pad 8 is not in [0, 8)", false},
		{"range", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[0],8,0,0]},` + cm + `}`, "leaf a: bad byte range [8, 0)", false},
		{"shape", `{"cls":"TensorDict","leaves":{"a":["torch.int8",[3],0,8,5]},"cls_metadata":{"batch_size":[4]}}`, "leaf a: shape [3] does not start with batch size [4]", false},
		{"child batch", `{"cls":"TensorDict","cls_metadata":{"batch_size":[4]},"n.m":{"cls":"TensorDict","cls_metadata":{"batch_size":[3]}}}`, `key ("n.m"): batch size [3] does not start with parent batch size [4]`, false},
		{"trailing", `{"cls":"TensorDict",` + cm + `} x`, "JSON offset 54: trailing data after the JSON value", false},
		{"non-tensor", `{"cls":"TensorDict","non_tensors":{"v":[1,2]},` + cm + `}`, "root: non-tensor v: JSON offset 42: want '[', found '2'", false},
		{"depth", `{"cls":"TensorDict","non_tensors":{"v":[[[[]]]]},` + cm + `}`, "root: non-tensor v: JSON offset 42: nesting deeper than 4: " + wire.ErrLimit.Error(), true},
		{"entries", `{"cls":"TensorDict","non_tensors":{"a":[1],"b":[2],"c":[3]},` + cm + `}`, "root: key c: more than 2 entries: " + wire.ErrLimit.Error(), true},
		{"bytes", strings.Repeat(" ", 1<<10+1), "metadata is 1025 bytes, limit 1024: " + wire.ErrLimit.Error(), true},
	}
	lim := Limits{MaxDepth: 4, MaxEntries: 2, MaxMetadataBytes: 1 << 10}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode([]byte(tt.meta), 64, lim)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Equal(t, tt.limit, errors.Is(err, wire.ErrLimit))
		})
	}
}

func TestDecodeTree(t *testing.T) {
	meta := []byte(`{"cls":"TensorDict","non_tensors":{"s":["x",[2],null]},"leaves":{"b":["torch.float32",[2],8,16,0],"a":["torch.int8",[2,3],0,8,2]},` +
		`"cls_metadata":{"device":null,"names":[null],"batch_size":[2],"is_locked":true},` +
		`"n":{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"batch_size":[2,1]}},"_tensorclass_type":"Point"}`)
	root, class, err := Decode(meta, 16, DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, "Point", class)
	assert.Equal(t, []int{2}, root.Batch)
	assert.True(t, root.Locked)
	assert.Equal(t, []NonTensor{{Name: "s", Value: "x", Batch: []int{2}}}, root.NonTensors)
	require.Len(t, root.Leaves, 2)
	assert.Equal(t, Leaf{Name: "b", DType: tensor.Float32, Shape: []int{2}, Start: 8, Stop: 16, NBytes: 8, Node: root}, root.Leaves[0])
	assert.Equal(t, Leaf{Name: "a", DType: tensor.Int8, Shape: []int{2, 3}, Start: 0, Stop: 8, Pad: 2, NBytes: 6, Node: root}, root.Leaves[1])
	require.Len(t, root.Children, 1)
	c := root.Children[0]
	assert.Equal(t, "n", c.Name)
	assert.Equal(t, -1, c.First)
	assert.Equal(t, Key{"n"}, c.Node.Path())
	assert.Equal(t, 2, root.SubNodes)
	assert.Equal(t, 4, root.SubEntries)
	assert.Equal(t, 3, root.SubDims)
}

func TestDecoderPoolDoesNotShare(t *testing.T) {
	a := []byte(`{"cls":"TensorDict","cls_metadata":{"batch_size":[1,2,3]}}`)
	b := []byte(`{"cls":"TensorDict","cls_metadata":{"batch_size":[7]}}`)
	root, _, err := Decode(a, 0, DefaultLimits())
	require.NoError(t, err)
	d := NewDecoder()
	_, _, err = d.Decode(b, 0, DefaultLimits())
	require.NoError(t, err)
	d.Release()
	assert.Equal(t, []int{1, 2, 3}, root.Batch, "a tree from Decode is the caller's")
}

// TestCheck builds by hand the tree of metadata another reader would
// decode (the torch wire format's, say) and checks that Check completes
// and refuses it as Decode does.
func TestCheck(t *testing.T) {
	meta := []byte(`{"cls":"TensorDict","non_tensors":{"s":["x",[2],null]},"leaves":{"b":["torch.float32",[2],8,16,0]},` +
		`"cls_metadata":{"batch_size":[2],"is_locked":true},` +
		`"n":{"cls":"TensorDict","leaves":{"a":["torch.int8",[2,3],0,8,2]},"cls_metadata":{"batch_size":[2,3]}}}`)
	build := func() *Node {
		n := &Node{Batch: []int{2, 3}, Leaves: []Leaf{{Name: "a", DType: tensor.Int8, Shape: []int{2, 3}, Start: 0, Stop: 8, Pad: 2}}}
		return &Node{Batch: []int{2}, Locked: true, NonTensors: []NonTensor{{Name: "s", Value: "x", Batch: []int{2}}},
			Leaves:   []Leaf{{Name: "b", DType: tensor.Float32, Shape: []int{2}, Start: 8, Stop: 16}},
			Children: []Child{{Name: "n", Node: n}}}
	}
	want, class, err := Decode(meta, 16, DefaultLimits())
	require.NoError(t, err)
	root := build()
	sorted, err := Check(root, 16)
	require.NoError(t, err)
	assert.Equal(t, dump(want, class), dump(root, ""))
	require.Len(t, sorted, 2)
	assert.Equal(t, "a", sorted[0].Name)

	_, err = Check(build(), 15)
	assert.EqualError(t, err, "leaf b: byte range [8, 16) is outside the storage of 15 bytes")
	bad := build()
	bad.Children[0].Node.Batch = []int{3}
	_, err = Check(bad, 16)
	assert.EqualError(t, err, "leaf n.a: shape [2 3] does not start with batch size [3]")
	bad = build()
	bad.Children[0].Node.Leaves[0].Start = 4
	bad.Children[0].Node.Leaves[0].Stop = 12
	_, err = Check(bad, 16)
	assert.EqualError(t, err, "leaf b bytes [8, 16) overlap leaf n.a bytes [4, 12)")
}

func TestDecodeStack(t *testing.T) {
	const sm = `"leaves":{},"cls_metadata":{"stack_dim":%d,"stack_dim_name":null,"is_locked":false}`
	stack := func(dim int, nonTensors string, children string) string {
		return `{"cls":"NonTensorStack","non_tensors":{` + nonTensors + `},` + fmt.Sprintf(sm, dim) + children + `}`
	}
	root := func(batch string, member string) []byte {
		return []byte(`{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"device":null,"names":null,"batch_size":` + batch + `,"is_locked":false},` + member + `}`)
	}
	tests := []struct {
		name   string
		meta   []byte
		shape  []int
		values []any
	}{
		{"python test_stack_consolidate", root("[2]", `"a":`+stack(0, `"0":["a string",[],null],"1":["another string",[],null]`, "")),
			[]int{2}, []any{"a string", "another string"}},
		{"broadcast elements", root("[2,3]", `"a":`+stack(0, `"0":["x",[3],null],"1":[1,[3],null]`, "")),
			[]int{2, 3}, []any{"x", "x", "x", int64(1), int64(1), int64(1)}},
		{"stack_dim 1", root("[2,3]", `"a":`+stack(1, `"0":["x",[2],null],"1":["y",[2],null],"2":["z",[2],null]`, "")),
			[]int{2, 3}, []any{"x", "y", "z", "x", "y", "z"}},
		{"nested stack", root("[2,2]", `"a":`+stack(0, `"1":["s",[2],null]`, `,"0":`+stack(0, `"0":[1,[],null],"1":[2,[],null]`, ""))),
			[]int{2, 2}, []any{int64(1), int64(2), "s", "s"}},
		{"nested along dim 1", root("[2,2]", `"a":`+stack(1, `"0":["s",[2],null]`, `,"1":`+stack(0, `"0":[1,[],null],"1":[2,[],null]`, ""))),
			[]int{2, 2}, []any{"s", int64(1), "s", int64(2)}},
		{"sorted keys, children first", []byte(`{"a":{"0":{"cls":"NonTensorStack","cls_metadata":{"is_locked":false,"stack_dim":0},"leaves":{},"non_tensors":{"0":[1,[],null],"1":[2,[],null]}},` +
			`"cls":"NonTensorStack","cls_metadata":{"is_locked":false,"stack_dim":0,"stack_dim_name":null},"leaves":{},"non_tensors":{"1":[3,[2],null]}},` +
			`"cls":"TensorDict","cls_metadata":{"batch_size":[2,2],"device":null,"is_locked":false,"names":[null,null]},"leaves":{},"non_tensors":{}}`),
			[]int{2, 2}, []any{int64(1), int64(2), int64(3), int64(3)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, _, err := Decode(tc.meta, 0, DefaultLimits())
			require.NoError(t, err)
			require.Len(t, n.NonTensors, 1)
			require.Empty(t, n.Children)
			nt := n.NonTensors[0]
			assert.Equal(t, "a", nt.Name)
			require.NotNil(t, nt.Stack)
			assert.Equal(t, tc.shape, nt.Stack.Shape)
			assert.Equal(t, tc.values, nt.Stack.Values)
			checkOracle(t, tc.meta, 0, DefaultLimits())
		})
	}

	bad := []struct {
		name  string
		meta  []byte
		want  string
		limit bool
	}{
		{"root", []byte(stack(0, `"0":[1,[],null]`, "")), `root: class "NonTensorStack" is not supported`, false},
		{"no elements", root("[0]", `"a":`+stack(0, "", "")), "key a: a NonTensorStack has no elements", false},
		{"gap", root("[2]", `"a":`+stack(0, `"0":[1,[],null],"2":[2,[],null]`, "")), `key a: element "2": the 2 elements of a NonTensorStack are named 0 to 1`, false},
		{"leading zero", root("[2]", `"a":`+stack(0, `"0":[1,[],null],"01":[2,[],null]`, "")), `element "01"`, false},
		{"batch differs", root("[2]", `"a":`+stack(0, `"0":[1,[],null],"1":[2,[1],null]`, "")), "element 1 has batch size [1], element 0 has []", false},
		{"stack_dim", root("[2]", `"a":`+stack(2, `"0":[1,[],null],"1":[2,[],null]`, "")), "stack_dim 2 out of range", false},
		{"negative stack_dim", root("[2]", `"a":`+stack(-1, `"0":[1,[],null],"1":[2,[],null]`, "")), "stack_dim -1 out of range", false},
		{"leaves", root("[2]", `"a":{"cls":"NonTensorStack","non_tensors":{"0":[1,[],null]},"leaves":{"x":["torch.int8",[1],0,8,7]},"cls_metadata":{"stack_dim":0}}`), "holds tensors or TensorDicts", false},
		{"child TensorDict", root("[1]", `"a":`+stack(0, `"0":[1,[],null]`, `,"1":{"cls":"TensorDict","cls_metadata":{"batch_size":[]}}`)), "holds tensors or TensorDicts", false},
		{"not the parent's batch", root("[3]", `"a":`+stack(0, `"0":[1,[],null],"1":[2,[],null]`, "")), "key a: NonTensorStack of batch size [2] under batch size [3]", false},
		{"longer than the parent's batch", root("[2]", `"a":`+stack(0, `"0":[1,[2],null],"1":[2,[2],null]`, "")), "NonTensorStack of batch size [2 2] under batch size [2]", false},
		{"broadcast bomb", root("[2,1000000000000]", `"a":`+stack(0, `"0":[1,[1000000000000],null],"1":[2,[1000000000000],null]`, "")), "more than 1048576 entries", true},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode(tc.meta, 64, DefaultLimits())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.limit, errors.Is(err, wire.ErrLimit), "%v", err)
			checkOracle(t, tc.meta, 64, DefaultLimits())
		})
	}
}
