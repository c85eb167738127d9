package tensordict

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// alignTD is the case of issue 12 item 7: a complex128 leaf after an
// int8[3] leaf, which an 8-byte padding alone puts at offset 8, where
// torch cannot view it; then a float32 and another complex128 after it,
// nested.
func alignTD(t *testing.T) *TensorDict {
	td := New()
	i8, err := tensor.FromSlice([]int8{1, -2, 3}, 3)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("a"), i8))
	z, err := tensor.FromSlice([]complex128{1 + 2i, -3 - 4i}, 2)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("z"), z))
	require.NoError(t, td.Set(K("n", "f"), tensor.Full(tensor.Float32, 5, 1)))
	w, err := tensor.FromSlice([]complex128{7i}, 1)
	require.NoError(t, err)
	require.NoError(t, td.Set(K("n", "w"), w))
	return td
}

// alignStarts are the byte offsets of alignTD's leaves: a [0, 3) + pad 5,
// 8 bytes of zeros, z [16, 48), f [48, 52) + pad 4, w [64, 80).
var alignStarts = map[string]int{"a": 0, "z": 16, "n.f": 48, "n.w": 64}

const alignTotal = 80

// metaStarts returns key -> [start, stop, pad] of every leaf of the
// consolidated metadata JSON meta.
func metaStarts(t *testing.T, meta []byte) map[string][3]int {
	t.Helper()
	var root map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(meta, &root))
	out := map[string][3]int{}
	var walk func(prefix string, node map[string]json.RawMessage)
	walk = func(prefix string, node map[string]json.RawMessage) {
		var leaves map[string][]json.RawMessage
		require.NoError(t, json.Unmarshal(node["leaves"], &leaves))
		for k, l := range leaves {
			var v [3]int
			for i := range 3 {
				require.NoError(t, json.Unmarshal(l[2+i], &v[i]))
			}
			out[prefix+k] = v
		}
		for k, raw := range node {
			switch k {
			case "cls", "leaves", "non_tensors", "cls_metadata", "_tensorclass_type":
				continue
			}
			var child map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(raw, &child))
			walk(prefix+k+".", child)
		}
	}
	walk("", root)
	return out
}

// requireAligned checks that meta places alignTD's leaves at alignStarts,
// each with stop - start = bytes + pad, pad < 8.
func requireAligned(t *testing.T, meta []byte) {
	t.Helper()
	got := metaStarts(t, meta)
	require.Len(t, got, len(alignStarts))
	for k, want := range alignStarts {
		assert.Equal(t, want, got[k][0], "start of %s", k)
		assert.Less(t, got[k][2], 8, "pad of %s", k)
	}
	assert.Zero(t, got["z"][0]%16)
	assert.Zero(t, got["n.w"][0]%16)
}

// requireAlignValues checks alignTD's values in td, and that its
// complex128 leaves view their storage at multiples of 16.
func requireAlignValues(t *testing.T, td *TensorDict) {
	t.Helper()
	requireSameTD(t, alignTD(t), td)
	for _, k := range []Key{K("z"), K("n", "w")} {
		x, err := td.Get(k)
		require.NoError(t, err)
		assert.Zero(t, x.Offset()%16, "%v at offset %d", k, x.Offset())
	}
}

func TestComplex128Aligned16(t *testing.T) {
	mpitest.Need(t, 1)
	td := alignTD(t)

	meta, total, err := Layout(td)
	require.NoError(t, err)
	assert.Equal(t, alignTotal, total)
	requireAligned(t, meta)

	c, err := td.Consolidate()
	require.NoError(t, err)
	require.True(t, c.IsConsolidated())
	requireAlignValues(t, c)
	cm, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	requireAligned(t, cm)
	assert.Equal(t, make([]byte, 13), c.ConsolidatedStorage().Bytes()[3:16], "pad and gap are zeros")

	buf := make([]byte, total)
	for i := range buf {
		buf[i] = 0xEE // old data: ConsolidateInto must clear the gap too
	}
	ci, err := td.ConsolidateInto(buf)
	require.NoError(t, err)
	requireAlignValues(t, ci)
	assert.Equal(t, c.ConsolidatedStorage().Bytes(), buf)

	for _, src := range []*TensorDict{td, c} {
		file := filepath.Join(t.TempDir(), "td.pt")
		require.NoError(t, src.SaveConsolidated(file))
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		stLen, fm, err := splitConsolidated(data, newReadConfig(nil))
		require.NoError(t, err)
		assert.Equal(t, alignTotal, stLen)
		requireAligned(t, fm)
		assert.Equal(t, c.ConsolidatedStorage().Bytes(), data[:stLen], "file storage = Consolidate's")
		got, err := LoadConsolidated(file)
		require.NoError(t, err)
		requireAlignValues(t, got)
		require.NoError(t, got.Release())
	}
}

// TestComplex128At8Accepted: a layout from an older sender or file, with
// complex128 at an offset that is a multiple of 8 only, still loads.
func TestComplex128At8Accepted(t *testing.T) {
	mpitest.Need(t, 1)
	st := tensor.NewStorage(40)
	b := st.Bytes()
	b[0], b[1], b[2] = 1, 0xFE, 3
	z, err := tensor.FromStorage(tensor.Complex128, st, 8, 2)
	require.NoError(t, err)
	src, err := tensor.FromSlice([]complex128{1 + 2i, -3 - 4i}, 2)
	require.NoError(t, err)
	require.NoError(t, z.CopyFrom(src))
	meta := `{"cls":"TensorDict","non_tensors":{},"leaves":{"a":["torch.int8",[3],0,8,5],"z":["torch.complex128",[2],8,40,0]},"cls_metadata":{"device":null,"names":[],"batch_size":[],"is_locked":false}}`
	got, err := FromConsolidated(st, []byte(meta))
	require.NoError(t, err)
	x, err := got.Get(K("z"))
	require.NoError(t, err)
	v, err := tensor.Data[complex128](x)
	require.NoError(t, err)
	assert.Equal(t, []complex128{1 + 2i, -3 - 4i}, v)
	assert.True(t, got.IsConsolidated())
}

// TestComplex128AlignedRemote: the sender's layout reaches every receive
// path with complex128 leaves at multiples of 16.
func TestComplex128AlignedRemote(t *testing.T) {
	g := mpitest.Need(t, 2)
	cases := []struct {
		name string
		send func(td *TensorDict) error
		recv func(t *testing.T) *TensorDict
	}{
		{"InitRemote", func(td *TensorDict) error { return td.InitRemote(1) }, func(t *testing.T) *TensorDict {
			got, err := FromRemoteInit(0, testCtx(t))
			require.NoError(t, err)
			return got
		}},
		{"Send consolidated", func(td *TensorDict) error {
			c, err := td.Consolidate()
			if err != nil {
				return err
			}
			return c.Send(1, WithConsolidated())
		}, func(t *testing.T) *TensorDict {
			td := alignTD(t)
			for _, it := range td.Items(IncludeNested(), LeavesOnly()) {
				require.NoError(t, td.Set(it.Key, tensor.Zeros(it.Tensor.DType(), it.Tensor.Shape()...)))
			}
			td, err := td.Consolidate()
			require.NoError(t, err)
			_, err = td.Recv(0, WithConsolidated(), testCtx(t))
			require.NoError(t, err)
			return td
		}},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			switch g.Rank() {
			case 0:
				require.NoError(t, c.send(alignTD(t)))
			case 1:
				got := c.recv(t)
				requireAlignValues(t, got)
				meta, err := got.ConsolidatedMetadata()
				require.NoError(t, err)
				requireAligned(t, meta)
			}
		})
	}
}
