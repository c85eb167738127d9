// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import "github.com/tdmpi/tdmpi/tensordict"

// inspectSchema names the version of the JSON that inspect -json prints.
// Fields may be added under the same name; none is removed or changed.
const inspectSchema = "tdmpi.inspect/v1"

// inspectReport is what inspect -json prints. (The text tree is
// tensordict's WriteTree.)
type inspectReport struct {
	Schema string  `json:"schema"` // inspectSchema
	Path   string  `json:"path"`   // the argument, as given
	Format string  `json:"format"` // "memmap" or "consolidated"
	Leaves int     `json:"leaves"` // tensor leaves at every level
	Bytes  int64   `json:"bytes"`  // bytes of the tensor leaves
	Root   *tdNode `json:"root"`
}

// tdNode describes a TensorDict.
type tdNode struct {
	BatchSize []int   `json:"batch_size"`
	Class     string  `json:"class,omitempty"` // tensorclass name
	Locked    bool    `json:"locked"`
	Entries   []entry `json:"entries"`
}

// Kinds of entries.
const (
	kindTensor     = "tensor"
	kindTensorDict = "tensordict"
	kindNonTensor  = "non_tensor"
)

// entry describes one entry of a TensorDict. Which fields are set depends
// on Kind.
type entry struct {
	Key  string `json:"key"`  // the entry's name at its level
	Kind string `json:"kind"` // kindTensor, kindTensorDict or kindNonTensor

	// Tensor leaves.
	DType     string `json:"dtype,omitempty"`
	Shape     []int  `json:"shape,omitzero"` // non-nil for tensors, [] for scalars
	Bytes     *int64 `json:"bytes,omitempty"`
	Values    []any  `json:"values,omitzero"` // json.Number, bool or string
	Truncated *bool  `json:"truncated,omitempty"`

	// Nested TensorDicts.
	Node *tdNode `json:"node,omitempty"`

	// Non-tensor values: the canonical value (nil, bool, string, int64,
	// float64, []any, map[string]any), which encoding/json encodes as is;
	// a pointer, so that a nil value prints as null and is not omitted.
	Value *any `json:"value,omitempty"`
}

// describe returns the node describing td and adds its leaves to rep's
// totals.
func describe(td *tensordict.TensorDict, n int, rep *inspectReport) *tdNode {
	node := &tdNode{
		BatchSize: td.BatchSize(),
		Class:     td.ClassName(),
		Locked:    td.IsLocked(),
		Entries:   []entry{},
	}
	if node.BatchSize == nil {
		node.BatchSize = []int{}
	}
	for _, it := range td.Items() {
		name := it.Key[len(it.Key)-1]
		switch {
		case it.Tensor != nil:
			t := it.Tensor
			nb := int64(t.NBytes())
			shape := t.Shape()
			if shape == nil {
				shape = []int{}
			}
			e := entry{Key: name, Kind: kindTensor, DType: t.DType().String(), Shape: shape, Bytes: &nb}
			if n > 0 {
				vals, trunc := leadingValues(t, n)
				e.Values, e.Truncated = vals, &trunc
			}
			node.Entries = append(node.Entries, e)
			rep.Leaves++
			rep.Bytes += nb
		case it.TD != nil:
			node.Entries = append(node.Entries, entry{Key: name, Kind: kindTensorDict, Node: describe(it.TD, n, rep)})
		default:
			v := it.Value
			node.Entries = append(node.Entries, entry{Key: name, Kind: kindNonTensor, Value: &v})
		}
	}
	return node
}
