package tensordict

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// seedTD builds the seed example: ("a","b"), "c", ("d","e","f") with batch
// [2], the last leaf 2x2, expanded to [1, 2] and made contiguous.
func seedTD(t testing.TB) *TensorDict {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("a", "b"), tensor.Ones(tensor.Float32, 2)))
	require.NoError(t, td.Set(K("c"), tensor.Ones(tensor.Float32, 2)))
	require.NoError(t, td.Set(K("d", "e", "f"), tensor.Ones(tensor.Float32, 2, 2)))
	ex, err := td.Expand(1, 2)
	require.NoError(t, err)
	return ex.Contiguous()
}

// canonJSON re-encodes JSON through encoding/json so two documents compare
// equal regardless of spacing (key order is checked separately).
func canonJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}

func TestConsolidateWorkedExamples(t *testing.T) {
	cm := `{"device":null,"names":[null,null],"batch_size":[1,2],"is_locked":false}`
	seedMeta := `{"cls":"TensorDict","non_tensors":{},"leaves":{"c":["torch.float32",[1,2],8,16,0]},"cls_metadata":` + cm + `,` +
		`"a":{"cls":"TensorDict","non_tensors":{},"leaves":{"b":["torch.float32",[1,2],0,8,0]},"cls_metadata":` + cm + `},` +
		`"d":{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":` + cm + `,` +
		`"e":{"cls":"TensorDict","non_tensors":{},"leaves":{"f":["torch.float32",[1,2,2],16,32,0]},"cls_metadata":` + cm + `}}}`

	mixed := New(3)
	require.NoError(t, mixed.Set(K("x"), tensor.Full(tensor.Float32, 1.5, 3)))
	require.NoError(t, mixed.Set(K("y"), tensor.Full(tensor.Int64, -2, 3)))
	require.NoError(t, mixed.Set(K("m"), tensor.Ones(tensor.Bool, 3)))
	cm3 := `{"device":null,"names":[null],"batch_size":[3],"is_locked":false}`
	mixedMeta := `{"cls":"TensorDict","non_tensors":{},"leaves":{"x":["torch.float32",[3],0,16,4],"y":["torch.int64",[3],16,40,0],"m":["torch.bool",[3],40,48,5]},"cls_metadata":` + cm3 + `}`

	nt := New(3)
	require.NoError(t, nt.Set(K("a"), tensor.Ones(tensor.Float32, 3)))
	require.NoError(t, nt.SetNonTensor(K("label"), "hello"))
	require.NoError(t, nt.Set(K("c"), tensor.Full(tensor.Float32, 2, 3, 2)))
	ntMeta := `{"cls":"TensorDict","non_tensors":{"label":["hello",[3],null]},"leaves":{"a":["torch.float32",[3],0,16,4],"c":["torch.float32",[3,2],16,40,0]},"cls_metadata":` + cm3 + `}`

	tests := []struct {
		name  string
		td    *TensorDict
		total int
		meta  string
		bytes func(t *testing.T, b []byte)
	}{
		{"seed", seedTD(t), 32, seedMeta, func(t *testing.T, b []byte) {
			one := []byte{0, 0, 0x80, 0x3f}
			for i := 0; i < 32; i += 4 {
				assert.Equal(t, one, b[i:i+4], "offset %d", i)
			}
		}},
		{"mixed", mixed, 48, mixedMeta, func(t *testing.T, b []byte) {
			want := []byte{
				0, 0, 0xc0, 0x3f, 0, 0, 0xc0, 0x3f, 0, 0, 0xc0, 0x3f, 0, 0, 0, 0, // x + pad 4
				0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // y
				1, 1, 1, 0, 0, 0, 0, 0, // m + pad 5
			}
			assert.Equal(t, want, b)
		}},
		{"non-tensor", nt, 40, ntMeta, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta, total, err := Layout(tc.td)
			require.NoError(t, err)
			assert.Equal(t, tc.total, total)
			assert.Equal(t, tc.meta, string(meta), "metadata bytes and key order")
			assert.Equal(t, canonJSON(t, tc.meta), canonJSON(t, string(meta)))

			c, err := tc.td.Consolidate()
			require.NoError(t, err)
			require.True(t, c.IsConsolidated())
			assert.False(t, tc.td.IsConsolidated())
			st := c.ConsolidatedStorage()
			require.NotNil(t, st)
			assert.Equal(t, tc.total, st.Len())
			if tc.bytes != nil {
				tc.bytes(t, st.Bytes())
			}
			cmeta, err := c.ConsolidatedMetadata()
			require.NoError(t, err)
			assert.Equal(t, tc.meta, string(cmeta))

			again, err := c.Consolidate()
			require.NoError(t, err)
			assert.Same(t, c, again)

			// Into a caller's buffer, dirty on purpose: pads must be zeroed.
			buf := make([]byte, total)
			for i := range buf {
				buf[i] = 0xAA
			}
			ci, err := tc.td.ConsolidateInto(buf)
			require.NoError(t, err)
			assert.Equal(t, st.Bytes(), buf)
			assert.True(t, ci.IsConsolidated())

			// And back.
			back, err := FromConsolidated(st, meta)
			require.NoError(t, err)
			assert.True(t, back.IsConsolidated())
			assert.Equal(t, tc.td.Keys(IncludeNested(), Sorted()), back.Keys(IncludeNested(), Sorted()))
			if tc.name == "seed" { // storage order restores insertion order
				assert.Equal(t, []Key{K("a"), K("c"), K("d")}, back.Keys())
			}
			eq, err := back.Eq(tc.td)
			require.NoError(t, err)
			assert.True(t, eq.All())
			bmeta, err := back.ConsolidatedMetadata()
			require.NoError(t, err)
			assert.Equal(t, tc.meta, string(bmeta))
		})
	}
}

// TestConsolidateParallel packs more than parallelThreshold bytes, so
// several goroutines copy, with contiguous and expanded leaves mixed.
func TestConsolidateParallel(t *testing.T) {
	td := New(2)
	for i := range 6 {
		require.NoError(t, td.Set(K("n", string(rune('a'+i))), tensor.Full(tensor.Float32, float64(i), 2, 1<<18)))
	}
	row := tensor.Full(tensor.Int16, -3, 1, 1<<18)
	ex, err := row.Expand(2, 1<<18)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("expanded"), ex))
	require.NoError(t, td.Set(K("odd"), tensor.Ones(tensor.Uint8, 2, 3)))
	c, err := td.Consolidate()
	require.NoError(t, err)
	require.Greater(t, c.ConsolidatedStorage().Len(), parallelThreshold)
	eq, err := c.Eq(td)
	require.NoError(t, err)
	assert.True(t, eq.All())
	odd, _ := c.Get(K("odd"))
	b := c.ConsolidatedStorage().Bytes()
	assert.Equal(t, make([]byte, 2), b[odd.Offset()+6:odd.Offset()+8], "pad bytes are zero")
}

// TestFromConsolidatedLockedSubtree checks that a node of the metadata
// that is locked locks every TensorDict below it too, as Lock does, and
// none above.
func TestFromConsolidatedLockedSubtree(t *testing.T) {
	node := func(locked bool, child string) string {
		return `{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"device":null,"names":[],"batch_size":[],"is_locked":` +
			map[bool]string{true: "true", false: "false"}[locked] + `}` + child + `}`
	}
	for _, locks := range [][3]bool{{false, false, false}, {true, false, false}, {false, true, false}, {false, false, true}, {true, false, true}} {
		meta := node(locks[0], `,"a":`+node(locks[1], `,"b":`+node(locks[2], "")))
		td, err := FromConsolidated(tensor.NewStorage(0), []byte(meta))
		require.NoError(t, err)
		a, b := mustTD(t, td, K("a")), mustTD(t, td, K("a", "b"))
		assert.Equal(t, [3]bool{locks[0], locks[0] || locks[1], locks[0] || locks[1] || locks[2]},
			[3]bool{td.IsLocked(), a.IsLocked(), b.IsLocked()}, "metadata locks %v", locks)
	}
}
