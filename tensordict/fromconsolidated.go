package tensordict

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/tensor"
)

// ConsolidatedOption sets a limit of FromConsolidated or LoadConsolidated,
// which read metadata from files and peers and so bound what it may cost.
type ConsolidatedOption func(*readConfig)

// readConfig holds the limits the options set, and the first invalid one.
type readConfig struct {
	codec.Limits
	err error // an invalid option
}

func newReadConfig(opts []ConsolidatedOption) readConfig {
	c := readConfig{Limits: codec.DefaultLimits()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithMaxDepth bounds the JSON nesting depth of the metadata (default 1000),
// which bounds the nesting of TensorDicts and of non-tensor values. An n
// below 1 makes the call return an error.
func WithMaxDepth(n int) ConsolidatedOption {
	return positiveLimit("WithMaxDepth", n, func(c *readConfig) *int { return &c.MaxDepth })
}

// WithMaxEntries bounds the total number of entries (tensor leaves, nested
// TensorDicts and non-tensor values) of the metadata (default 1<<20). An n
// below 1 makes the call return an error.
func WithMaxEntries(n int) ConsolidatedOption {
	return positiveLimit("WithMaxEntries", n, func(c *readConfig) *int { return &c.MaxEntries })
}

// WithMaxMetadataBytes bounds the size of the metadata JSON (default 256
// MiB). An n below 1 makes the call return an error.
func WithMaxMetadataBytes(n int) ConsolidatedOption {
	return positiveLimit("WithMaxMetadataBytes", n, func(c *readConfig) *int { return &c.MaxMetadataBytes })
}

// positiveLimit is the option setting the limit field to n, or recording
// an error naming option if n is below 1 (which would refuse everything).
func positiveLimit(option string, n int, field func(*readConfig) *int) ConsolidatedOption {
	return func(c *readConfig) {
		if n < 1 {
			c.err = errors.Join(c.err, fmt.Errorf("%s(%d): the limit must be at least 1", option, n))
			return
		}
		*field(c) = n
	}
}

// FromConsolidated rebuilds a TensorDict from a consolidated storage and its
// metadata JSON (see ConsolidatedMetadata), without copying: every leaf views
// st. meta may come from Python tensordict; the top-level transport fields it
// may hold (_total_bytes, _storage_device, _max_bytes, size) are skipped, and
// _tensorclass_type becomes the class name.
//
// meta and st may come from a file or a peer, so everything is checked before
// use: the JSON size, nesting depth and entry count (see the options), dtype
// names, shapes (no negative sizes, no overflow), each leaf's stop - start ==
// bytes + pad with pad < 8, ranges inside st and not overlapping, batch sizes
// that leaf shapes and nested batch sizes start with. Errors name the key.
//
// Entries come in the order the format records (see "Entry order" in the
// package doc): the writer's insertion order, but for non-tensor values
// and nested TensorDicts without tensor leaves. The result is locked if
// the metadata says so, and consolidated.
func FromConsolidated(st *tensor.Storage, meta []byte, opts ...ConsolidatedOption) (*TensorDict, error) {
	if st == nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: nil storage")
	}
	if st.Released() {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", tensor.ErrReleased)
	}
	cfg := newReadConfig(opts)
	if cfg.err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", cfg.err)
	}
	if len(meta) > cfg.MaxMetadataBytes {
		return nil, fmt.Errorf("tensordict: FromConsolidated: metadata is %d bytes, limit %d: %w", len(meta), cfg.MaxMetadataBytes, ErrLimit)
	}
	// The decoded tree lives only until the TensorDict is built, which
	// copies what it keeps (batch sizes; names and values are the
	// decoder's own), so the decoder goes back to the pool.
	d := codec.NewDecoder()
	root, class, err := d.Decode(meta, st.Len(), cfg.Limits)
	if err != nil {
		d.Release()
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td, err := buildTree(root, st, true)
	d.Release()
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td.cons.base, td.cons.end = 0, st.Len()
	td.class = class
	return td, nil
}

// buildFromMeta makes the TensorDict of a validated metadata node over st.
// It may be called again on the same tree (the receive cache does): it only
// sorts n's leaves, the first time, into storage order.
//
// The TensorDicts of the tree, their entries, their consolidation states
// and their tensors share five allocations.
func buildFromMeta(n *codec.Node, st *tensor.Storage) (*TensorDict, error) {
	return buildTree(n, st, false)
}

// buildTree is buildFromMeta; with copyBatch the batch sizes are copied
// (into one allocation) instead of shared with the tree.
func buildTree(n *codec.Node, st *tensor.Storage, copyBatch bool) (*TensorDict, error) {
	b := newTreeBuilder(n, st, copyBatch)
	return b.build(n)
}

func newTreeBuilder(n *codec.Node, st *tensor.Storage, copyBatch bool) treeBuilder {
	leaves, dims := metaLeaves(n)
	b := treeBuilder{
		st:      st,
		nodes:   make([]builtNode, n.SubNodes),
		entries: make([]entry, n.SubEntries),
		views:   make([]tensor.Tensor, leaves),
		dims:    make([]int, dims),
	}
	if copyBatch {
		b.batches = make([]int, n.SubDims)
	}
	return b
}

// metaLeaves returns the number of leaves of n's subtree and the number
// of ints their shapes and strides take.
func metaLeaves(n *codec.Node) (leaves, dims int) {
	leaves = len(n.Leaves)
	for i := range n.Leaves {
		dims += 2 * len(n.Leaves[i].Shape)
	}
	for _, c := range n.Children {
		l, d := metaLeaves(c.Node)
		leaves, dims = leaves+l, dims+d
	}
	return leaves, dims
}

// builtNode is a TensorDict built by buildFromMeta with its consolidation
// state, allocated together.
type builtNode struct {
	td TensorDict
	cs consState
}

// treeBuilder hands out the TensorDicts, consolidation states, entries and
// tensors of a tree built by buildFromMeta, in the order build takes them:
// depth first, a node's entries and tensors before its children's.
type treeBuilder struct {
	st      *tensor.Storage
	nodes   []builtNode
	entries []entry
	views   []tensor.Tensor
	dims    []int // the tensors' shapes and strides
	batches []int // nil: share the tree's batch sizes
	// locked: a node above the one being built is locked, and so is
	// every node below it (as Lock locks a subtree).
	locked bool
}

func (b *treeBuilder) build(n *codec.Node) (*TensorDict, error) {
	size := len(n.NonTensors) + len(n.Leaves) + len(n.Children)
	if len(b.nodes) == 0 || len(b.entries) < size || len(b.views) < len(n.Leaves) {
		// A tree whose counts were changed after decoding: a bug.
		panic("tensordict: buildFromMeta: metadata tree counts are wrong")
	}
	td, cs := &b.nodes[0].td, &b.nodes[0].cs
	b.nodes = b.nodes[1:]
	td.batch, td.entries = n.Batch, b.entries[:0:size]
	b.entries = b.entries[size:]
	td.index = newIndex(size)
	above := b.locked
	b.locked = above || n.Locked
	defer func() { b.locked = above }()
	views := b.views[:len(n.Leaves)]
	b.views = b.views[len(n.Leaves):]
	if b.batches != nil {
		k := len(n.Batch)
		td.batch = b.batches[:k:k]
		copy(td.batch, n.Batch)
		b.batches = b.batches[k:]
	}
	stacks := 0
	for i := range n.NonTensors {
		if n.NonTensors[i].Stack != nil {
			stacks++
			continue
		}
		nt := &n.NonTensors[i]
		if err := addNew(td, n, nt.Name, entry{kind: kindNonTensor, v: nt.Value}); err != nil {
			return nil, err
		}
	}
	byStart := func(a, b codec.Leaf) int { return cmp.Compare(a.Start, b.Start) }
	if !slices.IsSortedFunc(n.Leaves, byStart) {
		slices.SortStableFunc(n.Leaves, byStart)
	}
	order := nestedOrder(n, stacks)
	first, end := -1, 0
	li, ni, nn := 0, 0, len(n.Children)+stacks
	for li < len(n.Leaves) || ni < nn {
		var it nested
		if ni < nn {
			it = nestedAt(n, order, ni)
		}
		if ni == nn || (li < len(n.Leaves) && n.Leaves[li].Start <= it.at) {
			l := &n.Leaves[li]
			t := &views[li]
			li++
			k := 2 * len(l.Shape)
			if err := tensorx.FromStorageInto(t, b.dims[:k:k], l.DType, b.st, l.Start, l.Shape...); err != nil {
				return nil, fmt.Errorf("leaf %v: %w", Key(n.Path()).child(l.Name), err)
			}
			b.dims = b.dims[k:]
			if err := addNew(td, n, l.Name, entry{kind: kindTensor, t: t}); err != nil {
				return nil, err
			}
			if first < 0 {
				first = l.Start
			}
			end = max(end, l.Stop)
			continue
		}
		ni++
		if nt := it.stack; nt != nil {
			// The codec checked the shape (the node's batch size) and
			// counted the values against its entry limit.
			if _, err := stackLen(nt.Stack.Shape); err != nil {
				return nil, fmt.Errorf("non-tensor stack %v: %w", Key(n.Path()).child(nt.Name), err)
			}
			v := fromElements(nt.Stack.Values, nt.Stack.Shape, nil)
			if err := addNew(td, n, nt.Name, entry{kind: kindNonTensor, v: v}); err != nil {
				return nil, err
			}
			continue
		}
		c := it.child
		sub, err := b.build(c.Node)
		if err != nil {
			return nil, err
		}
		sub.cons.part = true
		if err := addNew(td, n, c.Name, entry{kind: kindTD, td: sub}); err != nil {
			return nil, err
		}
		if sub.cons.end > sub.cons.base {
			if first < 0 {
				first = sub.cons.base
			}
			end = max(end, sub.cons.end)
		}
	}
	if first < 0 {
		first, end = 0, 0
	}
	*cs = consState{st: b.st, base: first, end: end}
	td.cons = cs
	if b.locked {
		td.setLockedNode()
	}
	return td, nil
}

// nested is a child node of a node's metadata as build places it among
// the node's leaves: a nested TensorDict or a NonTensorStack, which goes
// after the leaves that start at or before at.
type nested struct {
	at    int
	child *codec.Child     // a nested TensorDict, or
	stack *codec.NonTensor // a NonTensorStack
}

// placedInOrder reports whether every child in cs holds a tensor leaf and
// they come in storage order, as a writer of the format lists them.
func placedInOrder(cs []codec.Child) bool {
	prev := -1
	for i := range cs {
		if cs[i].First < 0 || cs[i].First < prev {
			return false
		}
		prev = cs[i].First
	}
	return true
}

// nestedAt returns the i-th child node of n in build's order: order[i],
// or n.Children[i] when order is nil.
func nestedAt(n *codec.Node, order []nested, i int) nested {
	if order == nil {
		c := &n.Children[i]
		return nested{at: c.First, child: c}
	}
	return order[i]
}

// nestedOrder returns the child nodes of n (its Children and its
// NonTensorStacks) in the order build places them, or nil when that is
// n.Children as they are: each nested TensorDict that holds a tensor leaf
// at its first leaf's offset (in storage order), and each child node the
// storage does not place (a nested TensorDict without tensor leaves, a
// NonTensorStack) just before the placed one that follows it in the
// metadata, or after everything when none does. Among the child nodes,
// that is the metadata's order, which Python's reader keeps.
func nestedOrder(n *codec.Node, stacks int) []nested {
	if stacks == 0 && placedInOrder(n.Children) {
		return nil
	}
	order := make([]nested, 0, len(n.Children)+stacks)
	si := 0
	addStacks := func(upTo int) {
		for ; si < len(n.NonTensors); si++ {
			nt := &n.NonTensors[si]
			if nt.Stack == nil {
				continue
			}
			if nt.Child > upTo {
				return
			}
			order = append(order, nested{at: -1, stack: nt})
		}
	}
	for i := range n.Children {
		addStacks(i)
		order = append(order, nested{at: n.Children[i].First, child: &n.Children[i]})
	}
	addStacks(math.MaxInt)
	placed := func(x nested) bool { return x.child != nil && x.child.First >= 0 }
	next := math.MaxInt
	for i := len(order) - 1; i >= 0; i-- {
		if placed(order[i]) {
			next = order[i].at
		} else {
			order[i].at = next
		}
	}
	// Stable: at equal offsets (zero-byte leaves), the metadata's order,
	// which has each unplaced node before the placed one it goes with.
	slices.SortStableFunc(order, func(a, b nested) int { return cmp.Compare(a.at, b.at) })
	return order
}

// addNew adds entry e named name to td, the TensorDict of node n, unless td
// has one of that name already. td's index, if it has one, was made with
// room for all its entries (newIndex), so that an entry costs one map
// assignment, which tells a duplicate by the map's length.
func addNew(td *TensorDict, n *codec.Node, name string, e entry) error {
	j := len(td.entries)
	if td.index != nil {
		if td.index[name] = j; len(td.index) == j {
			return fmt.Errorf("key %v: defined twice", Key(n.Path()).child(name))
		}
	} else if _, dup := td.lookup(name); dup {
		return fmt.Errorf("key %v: defined twice", Key(n.Path()).child(name))
	}
	e.name = name
	td.entries = append(td.entries, e)
	td.edited()
	return nil
}
