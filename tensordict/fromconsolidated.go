package tensordict

import (
	"cmp"
	"fmt"
	"slices"

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
}

func newReadConfig(opts []ConsolidatedOption) readConfig {
	c := readConfig{maxDepth: defaultMaxDepth, maxEntries: defaultMaxEntries, maxMetaBytes: defaultMaxMetadataBytes}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithMaxDepth bounds the JSON nesting depth of the metadata (default 1000),
// which bounds the nesting of TensorDicts and of non-tensor values.
func WithMaxDepth(n int) ConsolidatedOption { return func(c *readConfig) { c.maxDepth = n } }

// WithMaxEntries bounds the total number of entries (tensor leaves, nested
// TensorDicts and non-tensor values) of the metadata (default 1<<20).
func WithMaxEntries(n int) ConsolidatedOption { return func(c *readConfig) { c.maxEntries = n } }

// WithMaxMetadataBytes bounds the size of the metadata JSON (default 256 MiB).
func WithMaxMetadataBytes(n int) ConsolidatedOption {
	return func(c *readConfig) { c.maxMetaBytes = n }
}

// topLevelExtras are the transport fields Python tensordict adds at the top
// of the metadata; the reader skips them.
var topLevelExtras = map[string]bool{
	"_total_bytes": true, "_storage_device": true, "_max_bytes": true, "_tensorclass_type": true,
}

// leafMeta is one decoded leaf: [dtype, shape, start, stop, pad].
type leafMeta struct {
	name             string
	dt               tensor.DType
	shape            []int
	start, stop, pad int
	nbytes           int
	path             Key // the node's key, for messages
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
	path     Key
	batch    []int
	names    int // length of names, -1 if absent or null
	locked   bool
	sawCls   bool
	sawCM    bool
	nts      []ntMeta
	leaves   []leafMeta
	children []childMeta
}

// metaDecoder reads a metadata tree.
type metaDecoder struct {
	p       jsonParser
	cfg     readConfig
	entries int
	class   string
	stLen   int
}

// decodeMetadata parses and validates meta against a storage of stLen bytes.
func decodeMetadata(meta []byte, stLen int, cfg readConfig) (*metaNode, string, error) {
	if len(meta) > cfg.maxMetaBytes {
		return nil, "", fmt.Errorf("metadata is %d bytes, limit %d", len(meta), cfg.maxMetaBytes)
	}
	d := &metaDecoder{p: jsonParser{data: meta, maxDepth: cfg.maxDepth}, cfg: cfg, stLen: stLen}
	root, err := d.node(nil, true)
	if err != nil {
		return nil, "", err
	}
	if err := d.p.end(); err != nil {
		return nil, "", err
	}
	if err := checkOverlap(root); err != nil {
		return nil, "", err
	}
	return root, d.class, nil
}

func (d *metaDecoder) count(path Key, name string) error {
	d.entries++
	if d.entries > d.cfg.maxEntries {
		return fmt.Errorf("key %v: more than %d entries", path.child(name), d.cfg.maxEntries)
	}
	return nil
}

// node reads one metadata level at key path.
func (d *metaDecoder) node(path Key, top bool) (*metaNode, error) {
	p := &d.p
	n := &metaNode{path: path, names: -1}
	where := func() string {
		if len(path) == 0 {
			return "root"
		}
		return "key " + path.String()
	}
	err := p.object(func(key string) error {
		switch {
		case key == "cls":
			s, err := p.str()
			if err != nil {
				return err
			}
			if s != "TensorDict" {
				return fmt.Errorf("%s: class %q is not supported (only TensorDict)", where(), s)
			}
			n.sawCls = true
			return nil
		case key == "non_tensors":
			return p.object(func(name string) error {
				if err := d.count(path, name); err != nil {
					return err
				}
				v, err := d.nonTensor(path.child(name))
				if err != nil {
					return err
				}
				n.nts = append(n.nts, ntMeta{name: name, v: v})
				return nil
			})
		case key == "leaves":
			return p.object(func(name string) error {
				if err := d.count(path, name); err != nil {
					return err
				}
				l, err := d.leaf(path, name)
				if err != nil {
					return err
				}
				n.leaves = append(n.leaves, l)
				return nil
			})
		case key == "cls_metadata":
			n.sawCM = true
			return d.clsMetadata(n, where)
		case key == "size" || (top && topLevelExtras[key]):
			if key == "_tensorclass_type" && !p.null() {
				s, err := p.str()
				if err != nil {
					return fmt.Errorf("_tensorclass_type: %w", err)
				}
				d.class = s
				return nil
			}
			return p.skip()
		default:
			if err := d.count(path, key); err != nil {
				return err
			}
			c, err := d.node(path.child(key), false)
			if err != nil {
				return err
			}
			n.children = append(n.children, childMeta{name: key, node: c})
			return nil
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where(), err)
	}
	if !n.sawCls {
		return nil, fmt.Errorf("%s: no \"cls\" field", where())
	}
	if !n.sawCM {
		return nil, fmt.Errorf("%s: no \"cls_metadata\" field", where())
	}
	if n.names >= 0 && n.names != len(n.batch) {
		return nil, fmt.Errorf("%s: %d names for batch size %v", where(), n.names, n.batch)
	}
	for i := range n.leaves {
		if err := d.checkLeaf(n, &n.leaves[i]); err != nil {
			return nil, err
		}
	}
	for _, c := range n.children {
		if !hasPrefix(c.node.batch, n.batch) {
			return nil, fmt.Errorf("key %v: batch size %v does not start with parent batch size %v", path.child(c.name), c.node.batch, n.batch)
		}
	}
	return n, nil
}

// nonTensor reads [data, batch_size, device].
func (d *metaDecoder) nonTensor(k Key) (any, error) {
	p := &d.p
	var v any
	err := p.array(func(i int) error {
		var err error
		switch i {
		case 0:
			v, err = p.value()
		case 1:
			_, err = p.ints("batch size")
		case 2:
			if !p.null() {
				_, err = p.str()
			}
		default:
			err = fmt.Errorf("more than 3 fields")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("non-tensor %v: %w", k, err)
	}
	return v, nil
}

// leaf reads [dtype, shape, start, stop, pad].
func (d *metaDecoder) leaf(path Key, name string) (leafMeta, error) {
	p := &d.p
	l := leafMeta{name: name, path: path}
	n := 0
	err := p.array(func(i int) error {
		n = i + 1
		var err error
		switch i {
		case 0:
			var s string
			if s, err = p.str(); err != nil {
				return err
			}
			if l.dt, err = tensor.ParseDType(s); err != nil {
				return fmt.Errorf("unsupported dtype %q", s)
			}
		case 1:
			l.shape, err = p.ints("shape")
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
		return err
	})
	if err == nil && n != 5 {
		err = fmt.Errorf("%d fields, want [dtype, shape, start, stop, pad]", n)
	}
	if err != nil {
		return l, fmt.Errorf("leaf %v: %w", path.child(name), err)
	}
	return l, nil
}

// clsMetadata reads {"device", "names", "batch_size", "is_locked"}.
func (d *metaDecoder) clsMetadata(n *metaNode, where func() string) error {
	p := &d.p
	sawBatch := false
	err := p.object(func(key string) error {
		switch key {
		case "device":
			if p.null() {
				return nil
			}
			_, err := p.str()
			return err
		case "names":
			if p.null() {
				return nil
			}
			n.names = 0
			return p.array(func(int) error {
				n.names++
				if p.null() {
					return nil
				}
				_, err := p.str()
				return err
			})
		case "batch_size":
			b, err := p.ints("batch size")
			n.batch, sawBatch = b, true
			return err
		case "is_locked":
			v, err := p.boolean()
			n.locked = v
			return err
		}
		return p.skip()
	})
	if err != nil {
		return fmt.Errorf("cls_metadata: %w", err)
	}
	if !sawBatch {
		return fmt.Errorf("%s: cls_metadata has no batch_size", where())
	}
	return nil
}

// checkLeaf validates a leaf against its node's batch size and the storage.
func (d *metaDecoder) checkLeaf(n *metaNode, l *leafMeta) error {
	k := n.path.child(l.name)
	if !hasPrefix(l.shape, n.batch) {
		return fmt.Errorf("leaf %v: shape %v does not start with batch size %v", k, l.shape, n.batch)
	}
	nb, err := tensor.NBytesOf(l.dt, l.shape)
	if err != nil {
		return fmt.Errorf("leaf %v: %w", k, err)
	}
	l.nbytes = nb
	switch {
	case l.pad < 0 || l.pad >= 8:
		return fmt.Errorf("leaf %v: pad %d is not in [0, 8)", k, l.pad)
	case l.start < 0 || l.stop < l.start:
		return fmt.Errorf("leaf %v: bad byte range [%d, %d)", k, l.start, l.stop)
	case l.stop-l.start != nb+l.pad || nb > l.stop-l.start:
		return fmt.Errorf("leaf %v: byte range [%d, %d) holds %d bytes, %v%v needs %d + pad %d", k, l.start, l.stop, l.stop-l.start, l.dt, l.shape, nb, l.pad)
	case l.stop > d.stLen:
		return fmt.Errorf("leaf %v: byte range [%d, %d) is outside the storage of %d bytes", k, l.start, l.stop, d.stLen)
	}
	return nil
}

// checkOverlap refuses leaves whose byte ranges overlap, and sets the first
// offset of every child.
func checkOverlap(root *metaNode) error {
	var all []*leafMeta
	var walk func(n *metaNode) int
	walk = func(n *metaNode) int {
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
			c.first = walk(c.node)
			if c.first >= 0 && (first < 0 || c.first < first) {
				first = c.first
			}
		}
		return first
	}
	walk(root)
	slices.SortStableFunc(all, func(a, b *leafMeta) int { return cmp.Compare(a.start, b.start) })
	var prev *leafMeta
	for _, l := range all {
		if l.stop == l.start {
			continue
		}
		if prev != nil && l.start < prev.stop {
			return fmt.Errorf("leaf %v bytes [%d, %d) overlap leaf %v bytes [%d, %d)",
				l.path.child(l.name), l.start, l.stop, prev.path.child(prev.name), prev.start, prev.stop)
		}
		prev = l
	}
	return nil
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
		return nil, fmt.Errorf("tensordict: FromConsolidated: storage was released")
	}
	root, class, err := decodeMetadata(meta, st.Len(), newReadConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td, err := buildFromMeta(root, st)
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromConsolidated: %w", err)
	}
	td.cons.base, td.cons.end = 0, st.Len()
	td.class = class
	return td, nil
}

// buildFromMeta makes the TensorDict of a validated metadata node over st.
func buildFromMeta(n *metaNode, st *tensor.Storage) (*TensorDict, error) {
	size := len(n.nts) + len(n.leaves) + len(n.children)
	td := &TensorDict{batch: n.batch, entries: make([]entry, 0, size), index: make(map[string]int, size)}
	add := func(name string, e entry) error {
		if _, dup := td.index[name]; dup {
			return fmt.Errorf("key %v: defined twice", n.path.child(name))
		}
		td.add(name, e)
		return nil
	}
	for _, nt := range n.nts {
		if err := add(nt.name, entry{kind: kindNonTensor, v: nt.v}); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(n.leaves, func(a, b leafMeta) int { return cmp.Compare(a.start, b.start) })
	slices.SortStableFunc(n.children, func(a, b childMeta) int {
		switch {
		case a.first < 0 && b.first < 0:
			return 0
		case a.first < 0:
			return 1
		case b.first < 0:
			return -1
		}
		return cmp.Compare(a.first, b.first)
	})
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
			t, err := tensor.FromStorage(l.dt, st, l.start, l.shape...)
			if err != nil {
				return nil, fmt.Errorf("leaf %v: %w", n.path.child(l.name), err)
			}
			if err := add(l.name, entry{kind: kindTensor, t: t}); err != nil {
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
		sub, err := buildFromMeta(c.node, st)
		if err != nil {
			return nil, err
		}
		if err := add(c.name, entry{kind: kindTD, td: sub}); err != nil {
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
	td.cons = &consState{st: st, base: first, end: end}
	if n.locked {
		td.Lock()
	}
	return td, nil
}
