// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"sync"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// A receive of metadata the receive cache holds (codec.Cache) builds the
// same tree as the receive before it over a new storage. Building it from
// the decoded metadata checks every leaf again and inserts every entry;
// the tree is instead made once, as a template over a zeroed storage of
// its own, and each receive copies it: its nodes, entries and tensors in
// three allocations, the tensors' shapes and strides and the nodes' name
// indexes shared with the template (copied on a node's first change, see
// ownIndex), the non-tensor values copied. tensor.ViewsLike checks the
// new storage as FromStorage would.

// templateMaxBytes is the largest storage a template is made for: it holds
// a zeroed storage of that size, and above it building costs little next
// to moving the bytes.
const templateMaxBytes = 64 << 10

// templateCacheSize is the number of templates a group keeps.
const templateCacheSize = 8

// A treeTemplate is a tree built by buildFromMeta, kept to be copied.
type treeTemplate struct {
	root  *codec.Node // the decoded tree (held by the receive cache)
	stLen int         // the storage size it was validated against
	nodes []builtNode // the tree, depth first (a node's entries before its children's)
	// entries of every node, in node order, and where each points: the
	// index of its tensor in views, of its TensorDict in nodes.
	entries []entry
	refs    []int
	views   []tensor.Tensor
}

// newTemplate builds the template of root for storages of stLen bytes.
func newTemplate(root *codec.Node, stLen int) (*treeTemplate, error) {
	b := newTreeBuilder(root, tensor.NewStorage(stLen), false)
	nodes, entries, views := b.nodes, b.entries, b.views
	if _, err := b.build(root); err != nil {
		return nil, err
	}
	tp := &treeTemplate{root: root, stLen: stLen, nodes: nodes, entries: entries, refs: make([]int, len(entries)), views: views}
	viewAt := make(map[*tensor.Tensor]int, len(views))
	for i := range views {
		viewAt[&views[i]] = i
	}
	nodeAt := make(map[*TensorDict]int, len(nodes))
	for i := range nodes {
		nodeAt[&nodes[i].td] = i
	}
	off := 0
	for i := range nodes {
		es := nodes[i].td.entries
		if len(es) > 0 && &es[0] != &entries[off] {
			panic("tensordict: newTemplate: a node's entries are not where the builder put them")
		}
		off += len(es)
	}
	for i, e := range entries {
		switch e.kind {
		case kindTensor:
			tp.refs[i] = viewAt[e.t]
		case kindTD:
			tp.refs[i] = nodeAt[e.td]
		}
	}
	return tp, nil
}

// instantiate returns a copy of tp's tree over st, a storage of tp.stLen
// bytes, as buildFromMeta and cloneNonTensors would make it.
func (tp *treeTemplate) instantiate(st *tensor.Storage) (*TensorDict, error) {
	views := make([]tensor.Tensor, len(tp.views))
	if err := tensor.ViewsLike(views, st, tp.views); err != nil {
		return nil, err
	}
	if st.Len() != tp.stLen {
		return nil, fmt.Errorf("tensordict: template for %d bytes used for a storage of %d (a bug)", tp.stLen, st.Len())
	}
	nodes := make([]builtNode, len(tp.nodes))
	entries := make([]entry, len(tp.entries))
	for i, e := range tp.entries {
		switch e.kind {
		case kindTensor:
			e.t = &views[tp.refs[i]]
		case kindTD:
			e.td = &nodes[tp.refs[i]].td
		case kindNonTensor:
			e.v = cloneValue(e.v)
		}
		entries[i] = e
	}
	off := 0
	for i := range nodes {
		src, dst := &tp.nodes[i], &nodes[i]
		n := len(src.td.entries)
		dst.cs = consState{st: st, base: src.cs.base, end: src.cs.end}
		dst.td.batch = src.td.batch
		dst.td.entries = entries[off : off+n : off+n]
		dst.td.index, dst.td.sharedIndex = src.td.index, src.td.index != nil
		dst.td.locked = src.td.locked
		dst.td.class = src.td.class
		dst.td.cons = &dst.cs
		off += n
	}
	return &nodes[0].td, nil
}

// templateCache is a group's templates, the last templateCacheSize made.
type templateCache struct {
	mu   sync.Mutex
	t    [templateCacheSize]*treeTemplate
	next int
}

var templateCaches = group.Slot[templateCache]{New: func() *templateCache { return new(templateCache) }}

// build returns the tree of root over st: a copy of root's template,
// made first if c has none. The template is made with c locked, so that
// a tree is built from root by one goroutine at a time.
func (c *templateCache) build(root *codec.Node, st *tensor.Storage) (*TensorDict, error) {
	c.mu.Lock()
	var tp *treeTemplate
	for _, t := range c.t {
		if t != nil && t.root == root && t.stLen == st.Len() {
			tp = t
			break
		}
	}
	if tp == nil {
		var err error
		if tp, err = newTemplate(root, st.Len()); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		c.t[c.next] = tp
		c.next = (c.next + 1) % templateCacheSize
	}
	c.mu.Unlock()
	return tp.instantiate(st)
}
