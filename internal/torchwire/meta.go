// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Meta is the neutral description of a TensorDict that the metadata pickle
// of tensordict's init_remote carries: the tree of nodes, and the root's
// transport fields.
type Meta struct {
	Root Node
	// TotalBytes is "_total_bytes": the size of the storage message.
	TotalBytes int64
	// StorageDevice is "_storage_device" ("cpu"), which broadcast mode
	// requires and point-to-point mode does not send; "" when absent.
	StorageDevice string
	// TensorclassType is "_tensorclass_type", the dotted Python name of
	// the tensorclass that was sent ("tensordict.testing.MyDistData"), ""
	// for a plain TensorDict.
	TensorclassType string
}

// Node is one TensorDict level: its entries in the sender's order, and its
// cls_metadata.
type Node struct {
	Cls        string // "TensorDict"
	NonTensors []NonTensor
	Leaves     []Leaf
	Children   []Child
	BatchSize  []int
	// Names has one entry per batch dimension, "" for an unnamed one
	// (None); nil when no dimension is named (names None, or a list of
	// None only).
	Names  []string
	Device string // "" for None
	Locked bool
}

// Leaf is one tensor leaf: a view of the storage's bytes [Start, Stop), of
// which the last Pad are padding.
type Leaf struct {
	Name             string
	DType            string // tensordict's name: "float32", "bool", ...
	Shape            []int
	Start, Stop, Pad int64
}

// NonTensor is one non-tensor value (tensordict's NonTensorData).
type NonTensor struct {
	Name string
	// Value is the data as plain Go values: nil, bool, int64, float64,
	// string, []any (a list or a tuple) and map[string]any.
	Value     any
	BatchSize []int
	Device    string // "" for None
}

// Child is a nested TensorDict.
type Child struct {
	Name string
	Node *Node
}

// dtypeInfo is one dtype of the consolidated storage: tensordict's name and
// its item size. The wire spells it "torch." + name.
var dtypeInfo = map[string]int{
	"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
	"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
}

// ItemSize returns the bytes per element of dtype name ("float32"), or 0
// if the torch wire format of tdmpi does not carry it.
func ItemSize(dtype string) int { return dtypeInfo[dtype] }

// Alignment returns the byte alignment a leaf of dtype name must start at
// in the storage for Python's receiver: 16 for complex128 (torch refuses
// to view bytes at another offset as complex128), 8 otherwise.
func Alignment(dtype string) int64 {
	if dtype == "complex128" {
		return 16
	}
	return 8
}

// Root keys tensordict adds beside the node's own.
const (
	keyTotalBytes  = "_total_bytes"
	keyStorageDev  = "_storage_device"
	keyTensorclass = "_tensorclass_type"
)

// ParseMeta decodes the pickle p (see Decode) and reads it as init_remote's
// metadata (see FromValue).
func ParseMeta(p []byte, broadcast bool, lim Limits) (*Meta, error) {
	v, err := Decode(p, lim)
	if err != nil {
		return nil, err
	}
	return FromValue(v, broadcast)
}

// FromValue reads a decoded metadata dict as init_remote sends it: the root
// node plus "_total_bytes" (required), "_storage_device" (required when
// broadcast) and "_tensorclass_type" (optional). A node has "cls"
// ("TensorDict"), "non_tensors" (name: (data, batch_size, device)),
// "leaves" (name: (dtype, shape, start, stop, pad)), "cls_metadata"
// (device, names, batch_size, is_locked) and one dict per nested
// TensorDict; "size" is ignored, as Python's receiver ignores it.
//
// Every field is checked: types, dtype names (one of the 12), shapes and
// batch sizes (non-negative, without overflow, leaf shapes and nested batch
// sizes starting with their node's batch size), names (one per batch
// dimension), and each leaf's byte range (stop - start = bytes + pad, pad
// below 16, inside _total_bytes). Errors wrap ErrMetadata and name the key.
func FromValue(v any, broadcast bool) (*Meta, error) {
	root, ok := v.(*Dict)
	if !ok {
		return nil, metaErr(nil, "the metadata is a %s, want a dict", typeName(v))
	}
	m := &Meta{TotalBytes: -1}
	if err := readNode(&m.Root, root, nil, m); err != nil {
		return nil, err
	}
	if m.TotalBytes < 0 {
		return nil, metaErr(nil, "no %q", keyTotalBytes)
	}
	if broadcast && m.StorageDevice == "" {
		return nil, metaErr(nil, "no %q, which broadcast mode sends", keyStorageDev)
	}
	if err := m.checkRanges(&m.Root, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// keyString formats a key for messages: ("a", "b"), or the root.
func keyString(k []string) string {
	if len(k) == 0 {
		return "the root"
	}
	q := make([]string, len(k))
	for i, p := range k {
		q[i] = strconv.Quote(p)
	}
	return "key (" + strings.Join(q, ", ") + ")"
}

func child(path []string, name string) []string {
	return append(slices.Clip(path), name)
}

// metaErr returns "torchwire: metadata: <key>: <msg>" wrapping ErrMetadata.
func metaErr(path []string, format string, args ...any) error {
	return fmt.Errorf("torchwire: metadata: %s: %s: %w", keyString(path), fmt.Sprintf(format, args...), ErrMetadata)
}

func readNode(n *Node, d *Dict, path []string, m *Meta) error {
	top := path == nil
	sawCM := false
	for i := range d.Len() {
		k, v := d.Key(i), d.Value(i)
		var err error
		switch {
		case k == "cls":
			s, ok := v.(string)
			switch {
			case !ok:
				err = metaErr(path, "cls is a %s, want str", typeName(v))
			case s != "TensorDict":
				err = metaErr(path, "class %q is not supported (only TensorDict)", s)
			}
			n.Cls = s
		case k == "non_tensors":
			err = readNonTensors(n, v, path)
		case k == "leaves":
			err = readLeaves(n, v, path)
		case k == "cls_metadata":
			sawCM = true
			err = readClsMetadata(n, v, path)
		case k == "size":
		case top && k == keyTotalBytes:
			t, ok := v.(int64)
			if !ok || t < 0 {
				err = metaErr(path, "%s is %v (%s), want a non-negative int", k, v, typeName(v))
			}
			m.TotalBytes = t
		case top && k == keyStorageDev:
			s, ok := v.(string)
			if !ok || s == "" {
				err = metaErr(path, "%s is %v (%s), want a device name", k, v, typeName(v))
			}
			m.StorageDevice = s
		case top && k == keyTensorclass:
			s, ok := v.(string)
			if !ok || s == "" {
				err = metaErr(path, "%s is %v (%s), want a dotted class name", k, v, typeName(v))
			}
			m.TensorclassType = s
		default:
			sub, ok := v.(*Dict)
			if !ok {
				return metaErr(child(path, k), "a %s where a nested TensorDict's dict belongs", typeName(v))
			}
			c := &Node{}
			if err := readNode(c, sub, child(path, k), m); err != nil {
				return err
			}
			n.Children = append(n.Children, Child{Name: k, Node: c})
		}
		if err != nil {
			return err
		}
	}
	switch {
	case n.Cls == "":
		return metaErr(path, "no \"cls\"")
	case !sawCM:
		return metaErr(path, "no \"cls_metadata\"")
	}
	for _, c := range n.Children {
		if !hasPrefix(c.Node.BatchSize, n.BatchSize) {
			return metaErr(child(path, c.Name), "batch size %v does not start with the parent's %v", c.Node.BatchSize, n.BatchSize)
		}
	}
	return nil
}

func hasPrefix(s, p []int) bool { return len(s) >= len(p) && slices.Equal(s[:len(p)], p) }

// ints reads a list or tuple of non-negative ints (a shape or batch size)
// whose product fits int64.
func ints(v any) ([]int, error) {
	items, ok := Items(v)
	if !ok {
		return nil, fmt.Errorf("a %s, want a list of ints", typeName(v))
	}
	out := make([]int, len(items))
	prod := int64(1)
	for i, it := range items {
		n, ok := it.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("element %d is %v (%s), want a non-negative int", i, it, typeName(it))
		}
		if n > 0 && prod > math.MaxInt64/n {
			return nil, fmt.Errorf("%v has more than 2^63 elements", items)
		}
		prod *= max(n, 1)
		out[i] = int(n)
	}
	return out, nil
}

// optString reads None or a str.
func optString(v any) (string, bool) {
	if v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

func readNonTensors(n *Node, v any, path []string) error {
	d, ok := v.(*Dict)
	if !ok {
		return metaErr(path, "non_tensors is a %s, want a dict", typeName(v))
	}
	for i := range d.Len() {
		k := d.Key(i)
		items, ok := Items(d.Value(i))
		if !ok || len(items) != 3 {
			return metaErr(child(path, k), "non-tensor entry is %s of %d, want (data, batch_size, device)", typeName(d.Value(i)), len(items))
		}
		val, err := Plain(items[0])
		if err != nil {
			return metaErr(child(path, k), "non-tensor data: %v", err)
		}
		bs, err := ints(items[1])
		if err != nil {
			return metaErr(child(path, k), "non-tensor batch size: %v", err)
		}
		dev, ok := optString(items[2])
		if !ok {
			return metaErr(child(path, k), "non-tensor device is a %s, want None or str", typeName(items[2]))
		}
		n.NonTensors = append(n.NonTensors, NonTensor{Name: k, Value: val, BatchSize: bs, Device: dev})
	}
	return nil
}

func readLeaves(n *Node, v any, path []string) error {
	d, ok := v.(*Dict)
	if !ok {
		return metaErr(path, "leaves is a %s, want a dict", typeName(v))
	}
	for i := range d.Len() {
		k := d.Key(i)
		kp := child(path, k)
		items, ok := Items(d.Value(i))
		switch {
		case !ok:
			return metaErr(kp, "leaf entry is a %s, want (dtype, shape, start, stop, pad)", typeName(d.Value(i)))
		case len(items) == 6:
			return metaErr(kp, "nested (ragged) tensors are not supported")
		case len(items) != 5:
			return metaErr(kp, "leaf entry has %d fields, want (dtype, shape, start, stop, pad)", len(items))
		}
		ds, ok := items[0].(string)
		if !ok {
			return metaErr(kp, "dtype is a %s, want str", typeName(items[0]))
		}
		name, found := strings.CutPrefix(ds, "torch.")
		if !found || ItemSize(name) == 0 {
			return metaErr(kp, "dtype %q is not supported (one of torch.bool, torch.uint8, ..., torch.complex128)", ds)
		}
		shape, err := ints(items[1])
		if err != nil {
			return metaErr(kp, "shape: %v", err)
		}
		var r [3]int64
		for j, f := range items[2:] {
			x, ok := f.(int64)
			if !ok {
				return metaErr(kp, "%s is %v (%s), want an int", [...]string{"start", "stop", "pad"}[j], f, typeName(f))
			}
			r[j] = x
		}
		n.Leaves = append(n.Leaves, Leaf{Name: k, DType: name, Shape: shape, Start: r[0], Stop: r[1], Pad: r[2]})
	}
	return nil
}

func readClsMetadata(n *Node, v any, path []string) error {
	d, ok := v.(*Dict)
	if !ok {
		return metaErr(path, "cls_metadata is a %s, want a dict", typeName(v))
	}
	sawBatch := false
	namesLen := -1 // entries in a names list, -1 without one
	for i := range d.Len() {
		k, v := d.Key(i), d.Value(i)
		switch k {
		case "device":
			s, ok := optString(v)
			if !ok {
				return metaErr(path, "cls_metadata device is a %s, want None or str", typeName(v))
			}
			n.Device = s
		case "names":
			if v == nil {
				continue
			}
			items, ok := Items(v)
			if !ok {
				return metaErr(path, "cls_metadata names is a %s, want a list", typeName(v))
			}
			names := make([]string, len(items))
			named := false
			for j, it := range items {
				s, ok := optString(it)
				if !ok {
					return metaErr(path, "cls_metadata names[%d] is a %s, want None or str", j, typeName(it))
				}
				names[j], named = s, named || s != ""
			}
			// A list of None for every dimension says what nil says;
			// keeping one form makes a parsed Meta canonical.
			n.Names, namesLen = nil, len(items)
			if named {
				n.Names = names
			}
		case "batch_size":
			bs, err := ints(v)
			if err != nil {
				return metaErr(path, "cls_metadata batch_size: %v", err)
			}
			n.BatchSize, sawBatch = bs, true
		case "is_locked":
			b, ok := v.(bool)
			if !ok {
				return metaErr(path, "cls_metadata is_locked is a %s, want bool", typeName(v))
			}
			n.Locked = b
		default:
			return metaErr(path, "cls_metadata has %q, which tensordict does not accept", k)
		}
	}
	if !sawBatch {
		return metaErr(path, "cls_metadata has no batch_size")
	}
	if namesLen >= 0 && namesLen != len(n.BatchSize) {
		return metaErr(path, "%d names for batch size %v", namesLen, n.BatchSize)
	}
	return nil
}

// checkRanges checks every leaf of n's subtree against its node's batch
// size and the storage size.
func (m *Meta) checkRanges(n *Node, path []string) error {
	for _, l := range n.Leaves {
		kp := child(path, l.Name)
		if !hasPrefix(l.Shape, n.BatchSize) {
			return metaErr(kp, "shape %v does not start with the batch size %v", l.Shape, n.BatchSize)
		}
		nb, ok := l.NBytes()
		switch {
		case !ok:
			return metaErr(kp, "%s%v has more than 2^63 bytes", l.DType, l.Shape)
		case l.Pad < 0 || l.Pad >= 16:
			return metaErr(kp, "pad %d is not in [0, 16)", l.Pad)
		case l.Start < 0 || l.Stop < l.Start:
			return metaErr(kp, "bad byte range [%d, %d)", l.Start, l.Stop)
		case l.Stop-l.Start != nb+l.Pad:
			return metaErr(kp, "byte range [%d, %d) holds %d bytes, %s%v needs %d + pad %d", l.Start, l.Stop, l.Stop-l.Start, l.DType, l.Shape, nb, l.Pad)
		case l.Stop > m.TotalBytes:
			return metaErr(kp, "byte range [%d, %d) is outside the storage of %d bytes", l.Start, l.Stop, m.TotalBytes)
		}
	}
	for _, c := range n.Children {
		if err := m.checkRanges(c.Node, child(path, c.Name)); err != nil {
			return err
		}
	}
	return nil
}

// NBytes returns the bytes of l's elements (without the pad), and false if
// that overflows int64.
func (l *Leaf) NBytes() (int64, bool) {
	n := int64(ItemSize(l.DType))
	for _, d := range l.Shape {
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

// Plain converts a decoded value to plain Go values: *List and *Tuple to
// []any, *Dict to map[string]any, scalars as they are. The decoder's
// bounds (depth, node count) bound its cost.
func Plain(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return x, nil
	case *List, *Tuple:
		items, _ := Items(x)
		out := make([]any, len(items))
		for i, it := range items {
			p, err := Plain(it)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	case *Dict:
		out := make(map[string]any, x.Len())
		for i := range x.Len() {
			p, err := Plain(x.Value(i))
			if err != nil {
				return nil, err
			}
			out[x.Key(i)] = p
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of Go type %T", v)
}
