package tensordict

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/tensor"
)

// Default limits of FromConsolidated and LoadConsolidated; see the
// ConsolidatedOption functions.
const (
	defaultMaxDepth         = 1000
	defaultMaxEntries       = 1 << 20
	defaultMaxMetadataBytes = 256 << 20
)

// ConsolidatedOption sets a limit of FromConsolidated or LoadConsolidated,
// which read metadata from files and peers and so bound what it may cost.
type ConsolidatedOption func(*readConfig)

type readConfig struct {
	maxDepth, maxEntries, maxMetaBytes int
	err                                error // an invalid option
}

func newReadConfig(opts []ConsolidatedOption) readConfig {
	c := readConfig{maxDepth: defaultMaxDepth, maxEntries: defaultMaxEntries, maxMetaBytes: defaultMaxMetadataBytes}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithMaxDepth bounds the JSON nesting depth of the metadata (default 1000),
// which bounds the nesting of TensorDicts and of non-tensor values. An n
// below 1 makes the call return an error.
func WithMaxDepth(n int) ConsolidatedOption {
	return positiveLimit("WithMaxDepth", n, func(c *readConfig) *int { return &c.maxDepth })
}

// WithMaxEntries bounds the total number of entries (tensor leaves, nested
// TensorDicts and non-tensor values) of the metadata (default 1<<20). An n
// below 1 makes the call return an error.
func WithMaxEntries(n int) ConsolidatedOption {
	return positiveLimit("WithMaxEntries", n, func(c *readConfig) *int { return &c.maxEntries })
}

// WithMaxMetadataBytes bounds the size of the metadata JSON (default 256
// MiB). An n below 1 makes the call return an error.
func WithMaxMetadataBytes(n int) ConsolidatedOption {
	return positiveLimit("WithMaxMetadataBytes", n, func(c *readConfig) *int { return &c.maxMetaBytes })
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

// isTopLevelExtra reports whether key is one of the transport fields Python
// tensordict adds at the top of the metadata; the reader skips them.
func isTopLevelExtra(key string) bool {
	switch key {
	case "_total_bytes", "_storage_device", "_max_bytes", "_tensorclass_type":
		return true
	}
	return false
}

// leafMeta is one decoded leaf: [dtype, shape, start, stop, pad].
type leafMeta struct {
	name             string
	dt               tensor.DType
	shape            []int
	start, stop, pad int
	nbytes           int
	node             *metaNode // the node holding the leaf, for messages
}

type ntMeta struct {
	name string
	v    any
}

type childMeta struct {
	name  string
	node  *metaNode
	first int // smallest leaf start in the subtree, -1 if it has no leaf
}

// metaNode is one decoded metadata level.
type metaNode struct {
	parent   *metaNode // nil at the root
	name     string    // the key part under parent
	level    int       // the number of parts of the node's key
	batch    []int
	names    int // length of names, -1 if absent or null
	locked   bool
	sawCls   bool
	sawCM    bool
	nts      []ntMeta
	leaves   []leafMeta
	children []childMeta
	subNodes int // nodes in the subtree, this one included
	subEnts  int // entries of all the nodes of the subtree
	subDims  int // batch dimensions of all the nodes of the subtree
}

// path returns the node's key, for messages (nil at the root).
func (n *metaNode) path() Key {
	depth := n.level
	if depth == 0 {
		return nil
	}
	k := make(Key, depth)
	for m := n; m.parent != nil; m = m.parent {
		depth--
		k[depth] = m.name
	}
	return k
}

// where names the node in messages.
func (n *metaNode) where() string {
	if n.parent == nil {
		return "root"
	}
	return "key " + n.path().String()
}

// metaDecoder reads a metadata tree. Its nodes, leaves, children and
// integers come from arenas, so that a small tree costs a handful of
// allocations, and its strings are substrings of one copy of the JSON.
type metaDecoder struct {
	p       jsonParser
	cfg     readConfig
	entries int
	leafN   int
	class   string
	stLen   int

	// Nodes and children are handed out by pointer or while the children
	// of other nodes are being collected, so they come from arenas whose
	// chunks never move. Leaves and integers are read in runs, each
	// appended at the end of one growing slice and handed out with its
	// capacity capped, so later runs never write over it.
	nodes    arena[metaNode]
	children arena[childMeta]
	childBuf []childMeta // a stack: the children of the nodes being read
	leaves   []leafMeta
	ints     []int

	// First chunks of the above, allocated with the decoder: enough for a
	// small TensorDict.
	nodes0    [4]metaNode
	children0 [4]childMeta
	childBuf0 [4]childMeta
	leaves0   [4]leafMeta
	ints0     [16]int
	all0      [8]*leafMeta

	// sorted is every leaf in storage order (by start, then in document
	// order), once decode has succeeded.
	sorted []*leafMeta
}

// init readies d, a zero decoder, to read meta.
func (d *metaDecoder) init(meta []byte, stLen int, cfg readConfig) {
	d.p, d.cfg, d.stLen = newJSONParser(meta, cfg.maxDepth), cfg, stLen
	d.nodes.buf = d.nodes0[:0]
	d.children.buf = d.children0[:0]
	d.childBuf = d.childBuf0[:0]
	d.leaves = d.leaves0[:0]
	d.ints = d.ints0[:0]
}

// decoderPool recycles the decoders of FromConsolidated, whose trees do not
// outlive the call.
var decoderPool = sync.Pool{New: func() any { return new(metaDecoder) }}

// intRun reads an array of non-negative integers into d.ints and returns
// it.
func (d *metaDecoder) intRun(what string) ([]int, error) {
	start := len(d.ints)
	var err error
	d.ints, err = d.p.appendInts(d.ints, what)
	return d.ints[start:len(d.ints):len(d.ints)], err
}

// placedError is an error that already names the node it comes from. The
// nodes above a nested node pass it on as it is, so that an error deep in
// the tree names its key once, instead of once per level (which, at the
// depth limit, would be a megabyte of text built in quadratic time).
type placedError struct{ err error }

func (e placedError) Error() string { return e.err.Error() }
func (e placedError) Unwrap() error { return e.err }

// decodeMetadata parses and validates meta against a storage of stLen bytes.
func decodeMetadata(meta []byte, stLen int, cfg readConfig) (*metaNode, string, error) {
	if len(meta) > cfg.maxMetaBytes {
		return nil, "", fmt.Errorf("metadata is %d bytes, limit %d: %w", len(meta), cfg.maxMetaBytes, ErrLimit)
	}
	d := new(metaDecoder)
	d.init(meta, stLen, cfg)
	return d.decode()
}

// decode reads the metadata d was initialized with.
func (d *metaDecoder) decode() (*metaNode, string, error) {
	root, err := d.node(nil, "", true)
	if err != nil {
		if pe, ok := err.(placedError); ok {
			err = pe.err
		}
		return nil, "", err
	}
	if err := d.p.end(); err != nil {
		return nil, "", err
	}
	if err := d.checkOverlap(root); err != nil {
		return nil, "", err
	}
	return root, d.class, nil
}

func (d *metaDecoder) count(n *metaNode, name string) error {
	d.entries++
	if d.entries > d.cfg.maxEntries {
		return fmt.Errorf("key %v: more than %d entries: %w", n.path().child(name), d.cfg.maxEntries, ErrLimit)
	}
	return nil
}

// node reads one metadata level, the member name of parent (nil at the
// root).
func (d *metaDecoder) node(parent *metaNode, name string, top bool) (*metaNode, error) {
	p := &d.p
	n := d.nodes.one()
	n.parent, n.name, n.names = parent, name, -1
	if parent != nil {
		n.level = parent.level + 1
	}
	mark := len(d.childBuf)
	more, err := p.openObject()
	for i := 0; more && err == nil; more, err = p.nextMember() {
		var key string
		if key, err = p.keyHint(nodeKeys[min(i, len(nodeKeys)-1)]); err != nil {
			break
		}
		i++
		if err = d.member(n, key, top); err != nil {
			break
		}
	}
	if err != nil {
		d.childBuf = d.childBuf[:mark]
		if _, placed := err.(placedError); placed {
			return nil, err
		}
		return nil, placedError{fmt.Errorf("%s: %w", n.where(), err)}
	}
	if len(d.childBuf) > mark {
		n.children = d.children.take(d.childBuf[mark:])
		clear(d.childBuf[mark:])
		d.childBuf = d.childBuf[:mark]
	}
	if !n.sawCls {
		return nil, fmt.Errorf("%s: no \"cls\" field", n.where())
	}
	if !n.sawCM {
		return nil, fmt.Errorf("%s: no \"cls_metadata\" field", n.where())
	}
	if n.names >= 0 && n.names != len(n.batch) {
		return nil, fmt.Errorf("%s: %d names for batch size %v", n.where(), n.names, n.batch)
	}
	for i := range n.leaves {
		if err := d.checkLeaf(n, &n.leaves[i]); err != nil {
			return nil, err
		}
	}
	n.subNodes, n.subEnts, n.subDims = 1, len(n.nts)+len(n.leaves)+len(n.children), len(n.batch)
	for _, c := range n.children {
		if !hasPrefix(c.node.batch, n.batch) {
			return nil, fmt.Errorf("key %v: batch size %v does not start with parent batch size %v", n.path().child(c.name), c.node.batch, n.batch)
		}
		n.subNodes += c.node.subNodes
		n.subEnts += c.node.subEnts
		n.subDims += c.node.subDims
	}
	return n, nil
}

// nodeKeys and clsMetadataKeys are the members of a node and of its
// cls_metadata in the order tensordict writes them: the parser tries them
// first (the last one stands for the rest).
var (
	nodeKeys        = [...]string{"cls", "non_tensors", "leaves", "cls_metadata", ""}
	clsMetadataKeys = [...]string{"device", "names", "batch_size", "is_locked", ""}
)

// member reads the value of member key of node n.
func (d *metaDecoder) member(n *metaNode, key string, top bool) error {
	p := &d.p
	switch {
	case key == "cls":
		s, err := p.strHint("TensorDict")
		if err != nil {
			return err
		}
		if s != "TensorDict" {
			return fmt.Errorf("%s: class %q is not supported (only TensorDict)", n.where(), s)
		}
		n.sawCls = true
		return nil
	case key == "non_tensors":
		more, err := p.openObject()
		for ; more && err == nil; more, err = p.nextMember() {
			var name string
			if name, err = p.key(); err != nil {
				break
			}
			if err = d.count(n, name); err != nil {
				break
			}
			var v any
			if v, err = d.nonTensor(n, name); err != nil {
				break
			}
			n.nts = append(n.nts, ntMeta{name: name, v: v})
		}
		return err
	case key == "leaves":
		start := len(d.leaves)
		more, err := p.openObject()
		for ; more && err == nil; more, err = p.nextMember() {
			var name string
			if name, err = p.key(); err != nil {
				break
			}
			if err = d.count(n, name); err != nil {
				break
			}
			d.leaves = append(d.leaves, leafMeta{})
			if err = d.leaf(n, name, &d.leaves[len(d.leaves)-1]); err != nil {
				break
			}
		}
		if err == nil && len(d.leaves) > start {
			run := d.leaves[start:len(d.leaves):len(d.leaves)]
			if n.leaves == nil {
				n.leaves = run
			} else {
				n.leaves = append(n.leaves, run...)
			}
			d.leafN += len(run)
		}
		return err
	case key == "cls_metadata":
		n.sawCM = true
		return d.clsMetadata(n)
	case key == "size" || (top && isTopLevelExtra(key)):
		if key == "_tensorclass_type" && !p.null() {
			s, err := p.str()
			if err != nil {
				return fmt.Errorf("_tensorclass_type: %w", err)
			}
			d.class = s
			return nil
		}
		return p.skip()
	}
	if err := d.count(n, key); err != nil {
		return err
	}
	c, err := d.node(n, key, false)
	if err != nil {
		if _, placed := err.(placedError); !placed {
			err = placedError{err}
		}
		return err
	}
	d.childBuf = append(d.childBuf, childMeta{name: key, node: c})
	return nil
}

// nonTensor reads [data, batch_size, device], the value of member name of
// non_tensors.
func (d *metaDecoder) nonTensor(n *metaNode, name string) (any, error) {
	p := &d.p
	var v any
	i := 0
	more, err := p.openArray()
	for ; more && err == nil; more, err = p.nextElem() {
		switch i {
		case 0:
			v, err = p.value()
		case 1:
			start := len(d.ints)
			_, err = d.intRun("batch size")
			d.ints = d.ints[:start]
		case 2:
			if !p.null() {
				_, err = p.str()
			}
		default:
			err = fmt.Errorf("more than 3 fields")
		}
		if err != nil {
			break
		}
		i++
	}
	if err != nil {
		return nil, fmt.Errorf("non-tensor %v: %w", n.path().child(name), err)
	}
	return v, nil
}

// leaf reads [dtype, shape, start, stop, pad], the value of member name of
// leaves, into l.
func (d *metaDecoder) leaf(n *metaNode, name string, l *leafMeta) error {
	p := &d.p
	l.name, l.node = name, n
	fields := 0
	more, err := p.openArray()
	for ; more && err == nil; more, err = p.nextElem() {
		fields++
		switch fields - 1 {
		case 0:
			var s string
			if s, err = p.str(); err != nil {
				break
			}
			if l.dt, err = tensor.ParseDType(s); err != nil {
				err = fmt.Errorf("unsupported dtype %q", s)
			}
		case 1:
			l.shape, err = d.intRun("shape")
		case 2:
			l.start, err = p.integer()
		case 3:
			l.stop, err = p.integer()
		case 4:
			l.pad, err = p.integer()
		case 5:
			err = fmt.Errorf("nested (ragged) tensors are not supported")
		default:
			err = fmt.Errorf("more than 5 fields")
		}
		if err != nil {
			break
		}
	}
	if err == nil && fields != 5 {
		err = fmt.Errorf("%d fields, want [dtype, shape, start, stop, pad]", fields)
	}
	if err != nil {
		return fmt.Errorf("leaf %v: %w", n.path().child(name), err)
	}
	return nil
}

// clsMetadata reads {"device", "names", "batch_size", "is_locked"}.
func (d *metaDecoder) clsMetadata(n *metaNode) error {
	p := &d.p
	sawBatch := false
	more, err := p.openObject()
	for i := 0; more && err == nil; more, err = p.nextMember() {
		var key string
		if key, err = p.keyHint(clsMetadataKeys[min(i, len(clsMetadataKeys)-1)]); err != nil {
			break
		}
		i++
		switch key {
		case "device":
			if !p.null() {
				_, err = p.str()
			}
		case "names":
			if p.null() {
				break
			}
			n.names = 0
			more, err := p.openArray()
			for ; more && err == nil; more, err = p.nextElem() {
				n.names++
				if !p.null() {
					if _, err = p.str(); err != nil {
						break
					}
				}
			}
			if err != nil {
				return fmt.Errorf("cls_metadata: %w", err)
			}
		case "batch_size":
			n.batch, err = d.intRun("batch size")
			sawBatch = true
		case "is_locked":
			n.locked, err = p.boolean()
		default:
			err = p.skip()
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("cls_metadata: %w", err)
	}
	if !sawBatch {
		return fmt.Errorf("%s: cls_metadata has no batch_size", n.where())
	}
	return nil
}

// checkLeaf validates a leaf against its node's batch size and the storage.
func (d *metaDecoder) checkLeaf(n *metaNode, l *leafMeta) error {
	if !hasPrefix(l.shape, n.batch) {
		return fmt.Errorf("leaf %v: shape %v does not start with batch size %v", n.path().child(l.name), l.shape, n.batch)
	}
	nb, err := tensor.NBytesOf(l.dt, l.shape)
	if err != nil {
		return fmt.Errorf("leaf %v: %w", n.path().child(l.name), err)
	}
	l.nbytes = nb
	switch {
	case l.pad < 0 || l.pad >= 8:
		return fmt.Errorf("leaf %v: pad %d is not in [0, 8)", n.path().child(l.name), l.pad)
	case l.start < 0 || l.stop < l.start:
		return fmt.Errorf("leaf %v: bad byte range [%d, %d)", n.path().child(l.name), l.start, l.stop)
	case l.stop-l.start != nb+l.pad || nb > l.stop-l.start:
		return fmt.Errorf("leaf %v: byte range [%d, %d) holds %d bytes, %v%v needs %d + pad %d", n.path().child(l.name), l.start, l.stop, l.stop-l.start, l.dt, l.shape, nb, l.pad)
	case l.stop > d.stLen:
		return fmt.Errorf("leaf %v: byte range [%d, %d) is outside the storage of %d bytes", n.path().child(l.name), l.start, l.stop, d.stLen)
	}
	return nil
}

// checkOverlap refuses leaves whose byte ranges overlap, and sets the first
// offset of every child.
//
// It leaves the leaves in storage order in d.sorted.
func (d *metaDecoder) checkOverlap(root *metaNode) error {
	all := d.all0[:0]
	if d.leafN > len(d.all0) {
		all = make([]*leafMeta, 0, d.leafN)
	}
	all, _ = collectLeaves(all, root)
	byStart := func(a, b *leafMeta) int { return cmp.Compare(a.start, b.start) }
	if !slices.IsSortedFunc(all, byStart) {
		slices.SortStableFunc(all, byStart)
	}
	d.sorted = all
	var prev *leafMeta
	for _, l := range all {
		if l.stop == l.start {
			continue
		}
		if prev != nil && l.start < prev.stop {
			return fmt.Errorf("leaf %v bytes [%d, %d) overlap leaf %v bytes [%d, %d)",
				l.node.path().child(l.name), l.start, l.stop, prev.node.path().child(prev.name), prev.start, prev.stop)
		}
		prev = l
	}
	return nil
}

// collectLeaves appends the leaves of n's subtree to all, each node's own
// leaves before its children's, sets the first offset of every child, and
// returns the subtree's first offset (-1 if it has no leaf).
func collectLeaves(all []*leafMeta, n *metaNode) ([]*leafMeta, int) {
	first := -1
	for i := range n.leaves {
		l := &n.leaves[i]
		all = append(all, l)
		if first < 0 || l.start < first {
			first = l.start
		}
	}
	for i := range n.children {
		c := &n.children[i]
		all, c.first = collectLeaves(all, c.node)
		if c.first >= 0 && (first < 0 || c.first < first) {
			first = c.first
		}
	}
	return all, first
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
// Entries are ordered as Python tensordict rebuilds them: non-tensor values
// first, then leaves and nested TensorDicts in storage order (which is the
// sender's insertion order), nested TensorDicts with no leaves last. The
// result is locked if the metadata says so, and consolidated.
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
	if len(meta) > cfg.maxMetaBytes {
		return nil, fmt.Errorf("tensordict: FromConsolidated: metadata is %d bytes, limit %d: %w", len(meta), cfg.maxMetaBytes, ErrLimit)
	}
	// The decoded tree lives only until the TensorDict is built, which
	// copies what it keeps (batch sizes; names and values are the
	// decoder's own), so the decoder goes back to the pool.
	d := decoderPool.Get().(*metaDecoder)
	d.init(meta, st.Len(), cfg)
	root, class, err := d.decode()
	if err != nil {
		*d = metaDecoder{}
		decoderPool.Put(d)
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td, err := buildTree(root, st, true)
	*d = metaDecoder{}
	decoderPool.Put(d)
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td.cons.base, td.cons.end = 0, st.Len()
	td.class = class
	return td, nil
}

// buildFromMeta makes the TensorDict of a validated metadata node over st.
// It may be called again on the same tree (the receive cache does): it only
// reorders n's leaves and children, the first time, into storage order.
//
// The TensorDicts of the tree, their entries and their consolidation states
// share three allocations.
func buildFromMeta(n *metaNode, st *tensor.Storage) (*TensorDict, error) {
	return buildTree(n, st, false)
}

// buildTree is buildFromMeta; with copyBatch the batch sizes are copied
// (into one allocation) instead of shared with the tree.
func buildTree(n *metaNode, st *tensor.Storage, copyBatch bool) (*TensorDict, error) {
	b := treeBuilder{
		st:      st,
		nodes:   make([]builtNode, n.subNodes),
		entries: make([]entry, n.subEnts),
	}
	if copyBatch {
		b.batches = make([]int, n.subDims)
	}
	return b.build(n)
}

// builtNode is a TensorDict built by buildFromMeta with its consolidation
// state, allocated together.
type builtNode struct {
	td TensorDict
	cs consState
}

// treeBuilder hands out the TensorDicts, consolidation states and entries
// of a tree built by buildFromMeta.
type treeBuilder struct {
	st      *tensor.Storage
	nodes   []builtNode
	entries []entry
	batches []int // nil: share the tree's batch sizes
}

func (b *treeBuilder) build(n *metaNode) (*TensorDict, error) {
	size := len(n.nts) + len(n.leaves) + len(n.children)
	if len(b.nodes) == 0 || len(b.entries) < size {
		// A tree whose counts were changed after decoding: a bug.
		panic("tensordict: buildFromMeta: metadata tree counts are wrong")
	}
	td, cs := &b.nodes[0].td, &b.nodes[0].cs
	b.nodes = b.nodes[1:]
	td.batch, td.entries = n.batch, b.entries[:0:size]
	b.entries = b.entries[size:]
	if b.batches != nil {
		k := len(n.batch)
		td.batch = b.batches[:k:k]
		copy(td.batch, n.batch)
		b.batches = b.batches[k:]
	}
	for _, nt := range n.nts {
		if err := addNew(td, n, nt.name, entry{kind: kindNonTensor, v: nt.v}); err != nil {
			return nil, err
		}
	}
	byStart := func(a, b leafMeta) int { return cmp.Compare(a.start, b.start) }
	if !slices.IsSortedFunc(n.leaves, byStart) {
		slices.SortStableFunc(n.leaves, byStart)
	}
	if !slices.IsSortedFunc(n.children, byFirst) {
		slices.SortStableFunc(n.children, byFirst)
	}
	first, end := -1, 0
	li, ci := 0, 0
	for li < len(n.leaves) || ci < len(n.children) {
		takeLeaf := ci == len(n.children)
		if !takeLeaf && li < len(n.leaves) {
			c := n.children[ci].first
			takeLeaf = c < 0 || n.leaves[li].start <= c
		}
		if takeLeaf {
			l := &n.leaves[li]
			li++
			t, err := tensor.FromStorage(l.dt, b.st, l.start, l.shape...)
			if err != nil {
				return nil, fmt.Errorf("leaf %v: %w", n.path().child(l.name), err)
			}
			if err := addNew(td, n, l.name, entry{kind: kindTensor, t: t}); err != nil {
				return nil, err
			}
			if first < 0 {
				first = l.start
			}
			end = max(end, l.stop)
			continue
		}
		c := &n.children[ci]
		ci++
		sub, err := b.build(c.node)
		if err != nil {
			return nil, err
		}
		if err := addNew(td, n, c.name, entry{kind: kindTD, td: sub}); err != nil {
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
	if n.locked {
		td.Lock()
	}
	return td, nil
}

// byFirst orders children by their first leaf offset, children without
// leaves last.
func byFirst(a, b childMeta) int {
	switch {
	case a.first < 0 && b.first < 0:
		return 0
	case a.first < 0:
		return 1
	case b.first < 0:
		return -1
	}
	return cmp.Compare(a.first, b.first)
}

// addNew adds entry e named name to td, the TensorDict of node n, unless td
// has one of that name already.
func addNew(td *TensorDict, n *metaNode, name string, e entry) error {
	if _, dup := td.lookup(name); dup {
		return fmt.Errorf("key %v: defined twice", n.path().child(name))
	}
	e.name = name
	td.appendEntry(e)
	return nil
}
