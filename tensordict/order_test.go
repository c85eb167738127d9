package tensordict

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// orderCase is a tree built from entries in the order given, and the
// order of its keys (Keys with IncludeNested, dotted) after a round trip
// through the consolidated format. An entry is "k" or "n.k" for a tensor
// leaf, "#k" for a non-tensor value, "@k" for a NonTensorStack, and "k/"
// for an empty nested TensorDict.
type orderCase struct {
	name    string
	entries []string
	want    []string // nil: the insertion order itself
}

// orderCases cover leaves interleaved with nested TensorDicts, non-tensor
// values and nested TensorDicts without tensor leaves, which the format
// does not place (see the package doc's rule).
var orderCases = []orderCase{
	{name: "leaves and nested", entries: []string{"a", "n.x", "b", "m.y", "m.z", "c"}},
	{name: "nested first", entries: []string{"n.x", "a", "n.y"},
		want: []string{"n", "n.x", "n.y", "a"}},
	{name: "deep", entries: []string{"z", "n.m.y", "n.w", "a", "n.m.v"},
		want: []string{"z", "n", "n.m", "n.m.y", "n.m.v", "n.w", "a"}},
	{name: "non-tensors first", entries: []string{"a", "#label", "n.x", "n.#id", "n.y", "#end"},
		want: []string{"label", "end", "a", "n", "n.id", "n.x", "n.y"}},
	{name: "leafless nested before the next nested", entries: []string{"n1.x", "a", "e/", "b", "n2.y"},
		want: []string{"n1", "n1.x", "a", "b", "e", "n2", "n2.y"}},
	{name: "leafless nested last", entries: []string{"a", "e/", "b", "f.#v", "c"},
		want: []string{"a", "b", "c", "e", "f", "f.v"}},
	{name: "stack among nested", entries: []string{"a", "@s", "n.x", "b", "@t"},
		want: []string{"a", "s", "n", "n.x", "b", "t"}},
}

// build returns the TensorDict of c's entries, of batch size [2].
func (c orderCase) build(t *testing.T) *TensorDict {
	t.Helper()
	td := New(2)
	for i, e := range c.entries {
		switch {
		case strings.HasSuffix(e, "/"):
			require.NoError(t, td.SetTD(dotted(strings.TrimSuffix(e, "/")), New(2)))
		case strings.Contains(e, "#"):
			k := dotted(strings.Replace(e, "#", "", 1))
			require.NoError(t, td.SetNonTensor(k, e))
		case strings.Contains(e, "@"):
			s, err := NewNonTensorStack([]any{"p", e}, 2)
			require.NoError(t, err)
			require.NoError(t, td.SetNonTensor(dotted(strings.Replace(e, "@", "", 1)), s))
		default:
			require.NoError(t, td.Set(dotted(e), tensor.Full(tensor.Float32, float64(i), 2, 3)))
		}
	}
	return td
}

func dotted(s string) Key { return K(strings.Split(s, ".")...) }

// want returns the keys c's round trip gives.
func (c orderCase) wantKeys(t *testing.T) []string {
	if c.want != nil {
		return c.want
	}
	return keyNames(c.build(t))
}

// keyNames returns td's keys, nested ones included, dotted.
func keyNames(td *TensorDict) []string {
	var out []string
	for _, k := range td.Keys(IncludeNested()) {
		out = append(out, k.Join("."))
	}
	return out
}

// TestConsolidatedOrder is issue 43 item 7: every reader of the
// consolidated format rebuilds the order it records (see the package
// doc), where LoadConsolidated, FromConsolidated and FromRemoteInit put
// leaves before nested TensorDicts.
func TestConsolidatedOrder(t *testing.T) {
	paths := []struct {
		name string
		trip func(t *testing.T, td *TensorDict) *TensorDict
	}{
		{"FromConsolidated", func(t *testing.T, td *TensorDict) *TensorDict {
			c, err := td.Consolidate()
			require.NoError(t, err)
			meta, err := c.ConsolidatedMetadata()
			require.NoError(t, err)
			got, err := FromConsolidated(c.ConsolidatedStorage(), meta)
			require.NoError(t, err)
			return got
		}},
		{"LoadConsolidated", func(t *testing.T, td *TensorDict) *TensorDict {
			f := filepath.Join(t.TempDir(), "td.pt")
			require.NoError(t, td.SaveConsolidated(f))
			got, err := LoadConsolidated(f)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, got.Release()) })
			return got
		}},
	}
	for _, c := range orderCases {
		t.Run(c.name+"/LoadMemmap", func(t *testing.T) {
			// A memmap directory records every entry in order.
			td := c.build(t)
			saved, err := td.Memmap(filepath.Join(t.TempDir(), "td"))
			require.NoError(t, err)
			defer func() { assert.NoError(t, saved.Release()) }()
			got, err := LoadMemmap(saved.SavedPath())
			require.NoError(t, err)
			defer func() { assert.NoError(t, got.Release()) }()
			assert.Equal(t, keyNames(td), keyNames(got))
		})
		for _, p := range paths {
			t.Run(c.name+"/"+p.name, func(t *testing.T) {
				got := p.trip(t, c.build(t))
				assert.Equal(t, c.wantKeys(t), keyNames(got))
			})
		}
	}
}

// TestRemoteOrder is TestConsolidatedOrder for InitRemote and
// FromRemoteInit, point to point and WithBroadcast, twice each (the second
// receive of a structure builds from the receiver's cached metadata).
func TestRemoteOrder(t *testing.T) {
	g := ownGroup(t)
	for _, c := range orderCases {
		for _, bcast := range []bool{false, true} {
			name := c.name + "/p2p"
			opts := []RemoteOption{WithGroup(g)}
			if bcast {
				name = c.name + "/broadcast"
				opts = append(opts, WithBroadcast())
			}
			mpitest.Run(t, name, func(t *testing.T) {
				for round := range 2 {
					if g.Rank() == 0 {
						require.NoError(t, c.build(t).InitRemote(1, opts...))
						continue
					}
					if !bcast && g.Rank() != 1 {
						continue
					}
					got, err := FromRemoteInit(0, append(opts, testCtx(t))...)
					require.NoError(t, err)
					assert.Equal(t, c.wantKeys(t), keyNames(got), "round %d", round)
				}
			})
		}
	}
}
