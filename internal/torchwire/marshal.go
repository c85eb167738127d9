// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import "fmt"

// Marshal pickles m as tensordict's init_remote sends its metadata, for
// Python's from_remote_init: each node's "cls", "non_tensors", "leaves",
// "cls_metadata" ({"device", "names", "batch_size", "is_locked"}; names
// None for every batch dimension when Node.Names is nil) and nested nodes
// in order, then at the root "_total_bytes", "_storage_device" when
// broadcast (m.StorageDevice, "cpu" when empty) and "_tensorclass_type"
// when set.
//
// It checks what Python's receiver would trip on: every leaf's dtype and
// byte range (as FromValue does) and the start of every complex128 leaf,
// which must be a multiple of 16. It does not check that leaves do not
// overlap.
func (m *Meta) Marshal(broadcast bool) ([]byte, error) {
	if m.TotalBytes < 0 {
		return nil, metaErr(nil, "_total_bytes is %d", m.TotalBytes)
	}
	if err := m.checkRanges(&m.Root, nil); err != nil {
		return nil, err
	}
	root, err := nodeDict(&m.Root, nil)
	if err != nil {
		return nil, err
	}
	root.Set(keyTotalBytes, m.TotalBytes)
	if broadcast {
		dev := m.StorageDevice
		if dev == "" {
			dev = "cpu"
		}
		root.Set(keyStorageDev, dev)
	}
	if m.TensorclassType != "" {
		root.Set(keyTensorclass, m.TensorclassType)
	}
	return Encode(root)
}

// reserved reports whether a nested TensorDict named name would be read
// back as a field of its parent (or dropped) by Python's receiver.
func reserved(name string, top bool) bool {
	switch name {
	case "cls", "non_tensors", "leaves", "cls_metadata", "size":
		return true
	case keyTotalBytes, keyStorageDev, keyTensorclass:
		return top
	}
	return false
}

func optNone(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nodeDict(n *Node, path []string) (*Dict, error) {
	cls := n.Cls
	if cls == "" {
		cls = "TensorDict"
	}
	d := NewDict(4 + len(n.Children) + 3)
	d.Set("cls", cls)
	nts := NewDict(len(n.NonTensors))
	for _, nt := range n.NonTensors {
		nts.Set(nt.Name, NewTuple(nt.Value, intsOrEmpty(nt.BatchSize), optNone(nt.Device)))
	}
	d.Set("non_tensors", nts)
	leaves := NewDict(len(n.Leaves))
	for _, l := range n.Leaves {
		if l.Start%Alignment(l.DType) != 0 {
			return nil, metaErr(child(path, l.Name), "%s leaf starts at byte %d, which Python's receiver refuses (not a multiple of %d)", l.DType, l.Start, Alignment(l.DType))
		}
		leaves.Set(l.Name, NewTuple("torch."+l.DType, intsOrEmpty(l.Shape), l.Start, l.Stop, l.Pad))
	}
	d.Set("leaves", leaves)
	names := make([]any, len(n.BatchSize))
	if n.Names != nil {
		if len(n.Names) != len(n.BatchSize) {
			return nil, metaErr(path, "%d names for batch size %v", len(n.Names), n.BatchSize)
		}
		for i, s := range n.Names {
			names[i] = optNone(s)
		}
	}
	cm := NewDict(4)
	cm.Set("device", optNone(n.Device))
	cm.Set("names", names)
	cm.Set("batch_size", intsOrEmpty(n.BatchSize))
	cm.Set("is_locked", n.Locked)
	d.Set("cls_metadata", cm)
	for _, c := range n.Children {
		if reserved(c.Name, path == nil) {
			return nil, metaErr(child(path, c.Name), "a nested TensorDict with this name would be read by Python's receiver as a metadata field")
		}
		if _, dup := d.Get(c.Name); dup {
			return nil, metaErr(child(path, c.Name), "nested twice")
		}
		cd, err := nodeDict(c.Node, child(path, c.Name))
		if err != nil {
			return nil, err
		}
		d.Set(c.Name, cd)
	}
	return d, nil
}

// intsOrEmpty returns s, or an empty non-nil slice, so that it pickles as
// a list.
func intsOrEmpty(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// String describes m in one line, for logs and messages.
func (m *Meta) String() string {
	return fmt.Sprintf("tensordict metadata: %d bytes of storage, batch size %v, %d leaves at the root, %d nested",
		m.TotalBytes, m.Root.BatchSize, len(m.Root.Leaves), len(m.Root.Children))
}
