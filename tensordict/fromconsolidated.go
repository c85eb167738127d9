package tensordict

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
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

// A receive of metadata the receive cache holds (codec.Cache) builds the
// same tree as the receive before it over a new storage. Building it from
// the decoded metadata checks every leaf again and inserts every entry;
// the tree is instead made once, as a template over a zeroed storage of
// its own, and each receive copies it: its nodes, entries and tensors in
// one allocation (of a struct type made for the template with reflect, so
// that the collector knows its pointers: one object, not three, is less
// work for the allocator and the collector), the tensors' shapes and
// strides and the nodes' name indexes shared with the template (copied on
// a node's first change, see ownIndex), the non-tensor values copied. A
// tensorx.ViewSet checks the leaves' layout once, and each new storage as
// FromStorage would.

// templateMaxBytes is the largest storage a template is made for. Making
// one allocates a zeroed storage of that size, which it drops once built;
// above it, building a tree (2.2 us for 16 leaves, against 0.8 us for a
// copy) costs little next to moving the bytes (190 us for 1 MiB here).
const templateMaxBytes = 1 << 20

// templateCacheSize is the number of templates a group keeps.
const templateCacheSize = 8

// A treeTemplate is a tree built by buildFromMeta, kept to be copied. Its
// own tensors view a released storage: only their layout is used.
type treeTemplate struct {
	root  *codec.Node // the decoded tree (held by the receive cache)
	stLen int         // the storage size it was validated against
	nodes []builtNode // the tree, depth first (a node's entries before its children's)
	// entries of every node, in node order, and where each points: the
	// index of its tensor in views, of its TensorDict in nodes.
	entries []entry
	refs    []int
	views   tensorx.ViewSet
	// block is the type of a copy's memory: its nodes, entries and
	// tensors in one allocation, at offsets 0, entriesAt and viewsAt.
	// copyBlock, for a storage of under copyMaxBytes, has the storage
	// after them, and its bytes (instantiateCopy).
	block              reflect.Type
	entriesAt, viewsAt uintptr
	copyBlock          dataBlock // data of stLen bytes; no type when stLen >= copyMaxBytes
	// plain: every non-tensor value of the tree is a scalar, so a copy
	// whose nodes are unedited has the template's metadata.
	plain bool
	// enc is what the first InitRemote of such a copy sends besides its
	// storage, set by the first one (sendInitOnce) for the others.
	enc atomic.Pointer[initEncoding]
}

// initEncoding is the header fields, class name and metadata of an
// InitRemote of a TensorDict whose storage is its consolidated layout.
type initEncoding struct {
	class  string
	meta   []byte
	hash   uint64
	leaves int64
}

// newTemplate builds the template of root for storages of stLen bytes.
func newTemplate(root *codec.Node, stLen int) (*treeTemplate, error) {
	st := tensor.NewStorage(stLen)
	b := newTreeBuilder(root, st, false)
	nodes, entries, views := b.nodes, b.entries, b.views
	if _, err := b.build(root); err != nil {
		return nil, err
	}
	vs, err := tensorx.NewViewSet(views)
	if err != nil {
		return nil, err
	}
	// The leaves were checked against st, and each copy lays the views
	// over a storage of its own: st, up to templateMaxBytes of zeros the
	// template's own tensors would keep, goes.
	st.Release()
	tp := &treeTemplate{root: root, stLen: stLen, nodes: nodes, entries: entries, refs: make([]int, len(entries)), views: vs,
		plain: plainValues(&nodes[0].td)}
	tp.block = reflect.StructOf([]reflect.StructField{
		{Name: "Nodes", Type: reflect.ArrayOf(len(nodes), reflect.TypeFor[builtNode]())},
		{Name: "Entries", Type: reflect.ArrayOf(len(entries), reflect.TypeFor[entry]())},
		{Name: "Views", Type: reflect.ArrayOf(len(views), reflect.TypeFor[tensor.Tensor]())},
	})
	tp.entriesAt, tp.viewsAt = tp.block.Field(1).Offset, tp.block.Field(2).Offset
	if stLen < copyMaxBytes {
		tp.copyBlock = tp.dataBlock()
	}
	off := 0
	for i := range nodes {
		es := nodes[i].td.entries
		if len(es) > 0 && &es[0] != &entries[off] {
			panic("tensordict: newTemplate: a node's entries are not where the builder put them")
		}
		off += len(es)
	}
	// The builder hands out tensors and TensorDicts from the arrays
	// views and nodes: an entry's is found there from its address.
	for i, e := range entries {
		switch e.kind {
		case kindTensor:
			tp.refs[i] = slot(e.t, len(views), func(j int) *tensor.Tensor { return &views[j] })
		case kindTD:
			tp.refs[i] = slot(e.td, len(nodes), func(j int) *TensorDict { return &nodes[j].td })
		}
	}
	return tp, nil
}

// slot returns the index j below n for which at(j) is x, where at(j) is
// the address of a field of element j of an array: j is x's offset from
// at(0) over the distance between elements.
func slot[T any](x *T, n int, at func(j int) *T) int {
	j := -1
	if n > 1 {
		stride := uintptr(unsafe.Pointer(at(1))) - uintptr(unsafe.Pointer(at(0)))
		j = int((uintptr(unsafe.Pointer(x)) - uintptr(unsafe.Pointer(at(0)))) / stride)
	} else if n == 1 {
		j = 0
	}
	if j < 0 || j >= n || at(j) != x {
		panic("tensordict: newTemplate: an entry's value is not where the builder put it")
	}
	return j
}

// copyMaxBytes bounds the storages whose copy instantiateCopy makes in
// the tree's own allocation: those of the frames a receive copies out of
// a reused buffer, all under mem.PoolMin (larger ones are received into
// memory of their own).
const copyMaxBytes = mem.PoolMin

// instantiate returns a copy of tp's tree over st, a storage of tp.stLen
// bytes, as buildFromMeta and cloneNonTensors would make it.
func (tp *treeTemplate) instantiate(st *tensor.Storage) (*TensorDict, error) {
	return tp.instantiateIn(reflect.New(tp.block).UnsafePointer(), st)
}

// instantiateCopy is instantiate over a copy of b, tp.stLen bytes, made
// in the same allocation as the tree, with its tensor.Storage, when
// tp.stLen is under copyMaxBytes: one object, written in one run, in
// place of three (the storage's bytes, the storage, then the tree). The
// copy lives as long as the tree's memory does, which its tensors keep
// alive anyway. Larger copies are copyStorage's.
func (tp *treeTemplate) instantiateCopy(b []byte) (*TensorDict, error) {
	return tp.instantiateCopyIn(b, nil)
}

// instantiateCopyIn is instantiateCopy in spare, when it is memory for
// a copy of tp (see spareCopy), else in memory of its own.
func (tp *treeTemplate) instantiateCopyIn(b []byte, spare *spareCopy) (*TensorDict, error) {
	if len(b) != tp.stLen {
		return nil, fmt.Errorf("tensordict: template for %d bytes used for a storage of %d (a bug)", tp.stLen, len(b))
	}
	if tp.copyBlock.typ == nil || len(b) == 0 {
		st, err := copyStorage(b)
		if err != nil {
			return nil, err
		}
		return tp.instantiate(st)
	}
	var block unsafe.Pointer
	if spare != nil && spare.tp == tp {
		block = spare.block
	} else {
		block = reflect.New(tp.copyBlock.typ).UnsafePointer()
	}
	data := blockPart[byte](block, tp.copyBlock.dataAt, tp.stLen)
	copy(data, b) // before the views check the storage's bools
	st := (*tensor.Storage)(unsafe.Add(block, tp.copyBlock.storageAt))
	rawbytes.InitAt(st, data)
	return tp.instantiateIn(block, st)
}

// A spareCopy is memory for a copy of template tp that holds its storage
// (a dataBlock), allocated before the storage arrives: a receive whose
// last result from the same rank was such a copy (initLayout.tp)
// allocates one while it waits for the frame, and the copy, if the frame
// has that structure again, is made in it; else the spare is left to the
// collector (a few KiB at most: copyMaxBytes bounds it). Allocating a 16-leaf
// copy's memory (zeroed, with its pointer map) was 0.7 us of the 1.2 us a
// copy took (a CPU profile of BenchmarkRemoteSmall16/InitRemoteEcho); off
// the receive's path, InitRemote of 8 B took 1.58 us one way against
// 1.79, of 512 B 2.30 against 2.91 (tdmpi bench initremote, np 2, three
// alternating runs).
type spareCopy struct {
	tp    *treeTemplate
	block unsafe.Pointer
}

// newSpare returns memory for a copy of tp holding its storage, or nil
// when tp is nil or makes no such copies.
func newSpare(tp *treeTemplate) *spareCopy {
	if tp == nil || tp.copyBlock.typ == nil {
		return nil
	}
	return &spareCopy{tp: tp, block: reflect.New(tp.copyBlock.typ).UnsafePointer()}
}

// A dataBlock is the type of a copy's memory that holds its storage's
// bytes too: tp.block's fields, then the tensor.Storage, at storageAt,
// then the storage's bytes, at dataAt.
type dataBlock struct {
	typ               reflect.Type
	storageAt, dataAt uintptr
}

// dataBlock returns the dataBlock of tp.
func (tp *treeTemplate) dataBlock() dataBlock {
	fields := make([]reflect.StructField, 0, 5)
	for i := range tp.block.NumField() {
		fields = append(fields, tp.block.Field(i))
	}
	// The fields before are 8-byte aligned, and so is Data: every
	// dtype's alignment (tensorx.ViewSet checks it all the same).
	typ := reflect.StructOf(append(fields,
		reflect.StructField{Name: "Storage", Type: reflect.TypeFor[tensor.Storage]()},
		reflect.StructField{Name: "Data", Type: reflect.ArrayOf(tp.stLen, reflect.TypeFor[byte]())}))
	return dataBlock{typ: typ, storageAt: typ.Field(3).Offset, dataAt: typ.Field(4).Offset}
}

// instantiateIn is instantiate in block, memory of type tp.block or of a
// dataBlock's type.
func (tp *treeTemplate) instantiateIn(block unsafe.Pointer, st *tensor.Storage) (*TensorDict, error) {
	nodes := blockPart[builtNode](block, 0, len(tp.nodes))
	entries := blockPart[entry](block, tp.entriesAt, len(tp.entries))
	views := blockPart[tensor.Tensor](block, tp.viewsAt, tp.views.Len())
	if err := tp.views.Over(views, st); err != nil {
		return nil, err
	}
	if st.Len() != tp.stLen {
		return nil, fmt.Errorf("tensordict: template for %d bytes used for a storage of %d (a bug)", tp.stLen, st.Len())
	}
	// Field by field, not copy(entries, tp.entries): while the collector
	// marks (half the time, in a loop of small receives), every pointer
	// written costs a write barrier, and a copy would write each
	// template entry's tensor, TensorDict and value words only to replace
	// them (16% of a 16-leaf copy's time, BenchmarkMetaSmall16Build/copy).
	for i := range entries {
		src, e := &tp.entries[i], &entries[i]
		e.name, e.kind = src.name, src.kind
		switch e.kind {
		case kindTensor:
			e.t = &views[tp.refs[i]]
		case kindTD:
			e.td = &nodes[tp.refs[i]].td
		case kindNonTensor:
			e.v = cloneValue(src.v)
		}
	}
	off := 0
	for i := range nodes {
		src, dst := &tp.nodes[i], &nodes[i]
		n := len(src.td.entries)
		dst.cs = consState{st: st, base: src.cs.base, end: src.cs.end, part: i > 0}
		dst.td.batch = src.td.batch
		dst.td.entries = entries[off : off+n : off+n]
		dst.td.index, dst.td.sharedIndex = src.td.index, src.td.index != nil
		dst.td.locked = src.td.locked
		dst.td.class = src.td.class
		dst.td.cons = &dst.cs
		off += n
	}
	nodes[0].td.tmpl = tp
	return &nodes[0].td, nil
}

// blockPart returns the n values of type T at offset off of block, a copy's
// memory (nil for none: an offset at the block's end points past it).
func blockPart[T any](block unsafe.Pointer, off uintptr, n int) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Add(block, off)), n)
}

// templateEncoding returns the encoding td's first InitRemote sends when
// td is a copy of a template (instantiate) that nothing changed since:
// no node edited (entries, batch size, lock state, class name), only
// scalar non-tensor values, its storage whole and in place. ok is false
// otherwise; enc is nil until a first such InitRemote recorded it
// (recordEncoding), and for a copy under another class name than the one
// that recorded it: a receive names a copy from its frame without an edit,
// so copies of one template may differ in class name (and the metadata's
// padding depends on the name's length).
func (td *TensorDict) templateEncoding() (enc *initEncoding, ok bool) {
	tp := td.tmpl
	if tp == nil || !tp.plain || !uneditedTree(td) {
		return nil, false
	}
	c := td.cons
	if c == nil || c.base != 0 || c.st.Released() || c.end != c.st.Len() || c.end != tp.stLen {
		return nil, false
	}
	if enc = tp.enc.Load(); enc != nil && enc.class != td.class {
		enc = nil
	}
	return enc, true
}

// recordEncoding keeps enc, the encoding of an unedited copy of td's
// template (templateEncoding reported ok), for the other copies.
func (td *TensorDict) recordEncoding(enc *initEncoding) {
	td.tmpl.enc.CompareAndSwap(nil, enc)
}

// uneditedTree reports whether no node of td's tree was edited since it
// was made.
func uneditedTree(td *TensorDict) bool {
	if td.edits != 0 {
		return false
	}
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD && !uneditedTree(e.td) {
			return false
		}
	}
	return true
}

// templateCache is a group's templates, the last templateCacheSize made.
type templateCache struct {
	mu   sync.Mutex
	t    [templateCacheSize]*treeTemplate
	next int
}

var templateCaches = proto.Slot[templateCache]{New: func() *templateCache { return new(templateCache) }}

// template returns root's template for storages of n bytes, made first
// if c has none. It is made with c locked, so that a tree is built from
// root by one goroutine at a time.
func (c *templateCache) template(root *codec.Node, n int) (*treeTemplate, error) {
	c.mu.Lock()
	var tp *treeTemplate
	for _, t := range c.t {
		if t != nil && t.root == root && t.stLen == n {
			tp = t
			break
		}
	}
	if tp == nil {
		var err error
		if tp, err = newTemplate(root, n); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		c.t[c.next] = tp
		c.next = (c.next + 1) % templateCacheSize
	}
	c.mu.Unlock()
	return tp, nil
}
