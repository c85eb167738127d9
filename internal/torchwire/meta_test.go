// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/torchwire"
)

// seedDict returns the decoded p2p metadata of case nested4.
func seedDict(t *testing.T) *torchwire.Dict {
	t.Helper()
	for _, c := range loadCases(t) {
		if c.Name == "nested4" {
			v, err := torchwire.Decode(c.Modes["p2p"].Payload[1], torchwire.Limits{})
			require.NoError(t, err)
			return v.(*torchwire.Dict)
		}
	}
	t.Fatal("no case nested4")
	return nil
}

func sub(d *torchwire.Dict, keys ...string) *torchwire.Dict {
	for _, k := range keys {
		v, _ := d.Get(k)
		d = v.(*torchwire.Dict)
	}
	return d
}

func TestFromValueNamesTheKey(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *torchwire.Dict)
		bcast  bool
		msg    string
	}{
		{"no total", func(d *torchwire.Dict) { d.Set("_total_bytes", "x") }, false, `the root: _total_bytes is x (str)`},
		{"no storage device in bcast", func(d *torchwire.Dict) {}, true, `no "_storage_device"`},
		{"dtype", func(d *torchwire.Dict) {
			sub(d, "l1", "l2", "leaves").Set("wide", torchwire.NewTuple("torch.qint8", li(2, 300), int64(48), int64(648), int64(0)))
		}, false, `key ("l1", "l2", "wide"): dtype "torch.qint8" is not supported`},
		{"range", func(d *torchwire.Dict) {
			sub(d, "l1", "l2", "leaves").Set("wide", torchwire.NewTuple("torch.int8", li(2, 300), int64(48), int64(640), int64(0)))
		}, false, `key ("l1", "l2", "wide"): byte range [48, 640) holds 592 bytes`},
		{"outside", func(d *torchwire.Dict) { d.Set("_total_bytes", int64(100)) }, false, `outside the storage of 100 bytes`},
		{"ragged", func(d *torchwire.Dict) {
			sub(d, "l1", "leaves").Set("w", torchwire.NewTuple("torch.float64", li(2), int64(648), int64(664), int64(0), nil))
		}, false, `key ("l1", "w"): nested (ragged)`},
		{"shape", func(d *torchwire.Dict) {
			sub(d, "l1", "leaves").Set("w", torchwire.NewTuple("torch.float64", li(-2), int64(648), int64(664), int64(0)))
		}, false, `key ("l1", "w"): shape: element 0 is -2`},
		{"batch prefix", func(d *torchwire.Dict) {
			sub(d, "l1", "leaves").Set("w", torchwire.NewTuple("torch.float64", li(1, 2), int64(648), int64(664), int64(0)))
		}, false, `key ("l1", "w"): shape [1 2] does not start with the batch size [2]`},
		{"non-tensor arity", func(d *torchwire.Dict) {
			sub(d, "non_tensors").Set("count", torchwire.NewTuple(int64(1), li(2)))
		}, false, `key ("count"): non-tensor entry is tuple of 2`},
		{"cls", func(d *torchwire.Dict) { sub(d, "l1").Set("cls", "LazyStackedTensorDict") }, false, `key ("l1"): class "LazyStackedTensorDict" is not supported`},
		{"cls_metadata key", func(d *torchwire.Dict) { sub(d, "l1", "cls_metadata").Set("stack_dim", int64(0)) }, false, `key ("l1"): cls_metadata has "stack_dim"`},
		{"names", func(d *torchwire.Dict) { sub(d, "l1", "cls_metadata").Set("names", []any{nil, nil}) }, false, `key ("l1"): 2 names for batch size [2]`},
		{"child batch", func(d *torchwire.Dict) { sub(d, "l1", "l2", "l3", "cls_metadata").Set("batch_size", li(3)) }, false, `key ("l1", "l2", "l3"): batch size [3] does not start with the parent's [2]`},
		{"child not a dict", func(d *torchwire.Dict) { sub(d, "l1").Set("x", int64(1)) }, false, `key ("l1", "x"): a int where a nested`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := seedDict(t)
			tt.change(d)
			_, err := torchwire.FromValue(d, tt.bcast)
			require.Error(t, err)
			assert.ErrorIs(t, err, torchwire.ErrMetadata)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestMarshalRefuses(t *testing.T) {
	m := &torchwire.Meta{TotalBytes: 24, Root: torchwire.Node{BatchSize: []int{1}, Leaves: []torchwire.Leaf{
		{Name: "x", DType: "float64", Shape: []int{1}, Start: 0, Stop: 8},
		{Name: "z", DType: "complex128", Shape: []int{1}, Start: 8, Stop: 24},
	}}}
	_, err := m.Marshal(false)
	assert.ErrorContains(t, err, `key ("z"): complex128 leaf starts at byte 8`)

	m = &torchwire.Meta{TotalBytes: 0, Root: torchwire.Node{Children: []torchwire.Child{{Name: "_total_bytes", Node: &torchwire.Node{}}}}}
	_, err = m.Marshal(false)
	assert.ErrorContains(t, err, "metadata field")

	m = &torchwire.Meta{TotalBytes: 4, Root: torchwire.Node{Leaves: []torchwire.Leaf{{Name: "x", DType: "float32", Start: 0, Stop: 8}}}}
	_, err = m.Marshal(false)
	assert.ErrorContains(t, err, "holds 8 bytes")
}

// li returns the decoded form of a list of ints.
func li(v ...int64) *torchwire.List {
	items := make([]any, len(v))
	for i, x := range v {
		items[i] = x
	}
	return &torchwire.List{Items: items}
}

// TestNamesCanonical checks that a names list of None for every batch
// dimension parses as nil Names, whatever the batch size, so that a parsed
// Meta survives Marshal and ParseMeta unchanged (a fuzzer found the 0-d
// case: nil Names marshal as an empty list).
func TestNamesCanonical(t *testing.T) {
	for _, tc := range []struct {
		batch []int
		names []string
		want  []string
	}{
		{nil, nil, nil},
		{[]int{}, nil, nil},
		{[]int{2, 3}, nil, nil},
		{[]int{2, 3}, []string{"", ""}, nil},
		{[]int{2, 3}, []string{"", "time"}, []string{"", "time"}},
	} {
		m := &torchwire.Meta{Root: torchwire.Node{BatchSize: tc.batch, Names: tc.names}}
		p, err := m.Marshal(false)
		require.NoError(t, err, "batch %v names %q", tc.batch, tc.names)
		back, err := torchwire.ParseMeta(p, false, torchwire.Limits{})
		require.NoError(t, err, "batch %v names %q", tc.batch, tc.names)
		assert.Equal(t, tc.want, back.Root.Names, "batch %v names %q", tc.batch, tc.names)
		again, err := back.Marshal(false)
		require.NoError(t, err)
		assert.Equal(t, p, again, "batch %v names %q: a second round trip changed the bytes", tc.batch, tc.names)
	}
}
