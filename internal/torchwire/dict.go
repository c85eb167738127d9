// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

// Dict is a Python dict with str keys, in insertion order, as the pickle
// codec decodes and encodes it. Setting a key that is present replaces its
// value and keeps its position, as in Python.
type Dict struct {
	keys  []string
	vals  []any
	index map[string]int
	shape
}

// List is a Python list, as the decoder returns it.
type List struct {
	Items []any
	shape
}

// Tuple is a Python tuple, as the decoder returns it. The encoder writes a
// *Tuple as a tuple and a []any as a list.
type Tuple struct {
	Items []any
	shape
}

// NewTuple returns the tuple of items.
func NewTuple(items ...any) *Tuple { return &Tuple{Items: items} }

// shape is what the decoder tracks of a container to bound the tree it
// builds: nesting depth and node count, both exact because a container
// that has been put into another one can no longer change (sealed).
type shape struct {
	depth  int  // 1 + the deepest child's depth
	size   int  // nodes of the tree under it, itself included, shared subtrees counted each time
	sealed bool // it is inside another container
}

// Items returns the elements of a list or a tuple and true, or nil and
// false for any other value.
func Items(v any) ([]any, bool) {
	switch x := v.(type) {
	case *List:
		return x.Items, true
	case *Tuple:
		return x.Items, true
	case []any:
		return x, true
	}
	return nil, false
}

// NewDict returns an empty Dict with room for n items.
func NewDict(n int) *Dict {
	return &Dict{keys: make([]string, 0, n), vals: make([]any, 0, n)}
}

// Len returns the number of items.
func (d *Dict) Len() int { return len(d.keys) }

// Key returns the i-th key in insertion order.
func (d *Dict) Key(i int) string { return d.keys[i] }

// Value returns the i-th value in insertion order.
func (d *Dict) Value(i int) any { return d.vals[i] }

// Get returns the value of k and whether k is present.
func (d *Dict) Get(k string) (any, bool) {
	i := d.find(k)
	if i < 0 {
		return nil, false
	}
	return d.vals[i], true
}

// Set sets k to v.
func (d *Dict) Set(k string, v any) {
	if i := d.find(k); i >= 0 {
		d.vals[i] = v
		return
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	if d.index != nil {
		d.index[k] = len(d.keys) - 1
	}
}

// linearMax is the size up to which find searches the keys linearly.
const linearMax = 8

func (d *Dict) find(k string) int {
	if d.index == nil && len(d.keys) > linearMax {
		d.index = make(map[string]int, len(d.keys))
		for i, key := range d.keys {
			d.index[key] = i
		}
	}
	if d.index != nil {
		if i, ok := d.index[k]; ok {
			return i
		}
		return -1
	}
	for i, key := range d.keys {
		if key == k {
			return i
		}
	}
	return -1
}
