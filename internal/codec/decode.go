package codec

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// Leaf is one decoded tensor leaf: [dtype, shape, start, stop, pad].
type Leaf struct {
	Name             string
	DType            tensor.DType
	Shape            []int
	Start, Stop, Pad int
	NBytes           int   // numel * itemsize
	Node             *Node // the node holding the leaf
}

// NonTensor is one decoded non-tensor value, in the canonical form: nil,
// bool, string, int64, float64, []any or map[string]any; or, when Stack is
// set, a NonTensorStack (Value is then nil).
type NonTensor struct {
	Name  string
	Value any
	Batch []int  // the batch size the metadata gives the value
	Stack *Stack // a NonTensorStack, nil for a single value
	// Child is, for a Stack (a child node of the metadata), the number
	// of nested TensorDicts the metadata lists before it: its place among
	// the node's Children.
	Child int
}

// Stack is a decoded NonTensorStack node (cls "NonTensorStack": one
// non-tensor element, or nested stack, per index "0", "1", ... along
// cls_metadata's stack_dim): the values of its elements, one per element of
// Shape, row-major, whatever the stack dimension. Decode turns such a node
// into a NonTensor of its parent; it counts every value against
// Limits.MaxEntries.
type Stack struct {
	Shape  []int
	Values []any
}

// Child is one nested TensorDict of a node.
type Child struct {
	Name  string
	Node  *Node
	First int // smallest leaf start in the subtree, -1 if it has no leaf
}

// Node is one decoded metadata level: the neutral description of one
// TensorDict of the tree. A decoded tree has passed every check of Decode.
type Node struct {
	Parent     *Node  // nil at the root
	Name       string // the key part under Parent
	Level      int    // the number of parts of the node's key
	Batch      []int
	Locked     bool
	NonTensors []NonTensor // in document order
	Leaves     []Leaf      // in document order
	Children   []Child     // in document order
	SubNodes   int         // nodes in the subtree, this one included
	SubEntries int         // entries of all the nodes of the subtree
	SubDims    int         // batch dimensions of all the nodes of the subtree

	names    int // length of names, -1 if absent or null
	sawCls   bool
	sawCM    bool
	sawBatch bool
	stack    bool // cls is NonTensorStack
	stackDim int  // cls_metadata's stack_dim, of a stack
	children int  // nested TensorDicts decoded so far
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

// Path returns the node's key (nil at the root).
func (n *Node) Path() Key {
	depth := n.Level
	if depth == 0 {
		return nil
	}
	k := make(Key, depth)
	for m := n; m.Parent != nil; m = m.Parent {
		depth--
		k[depth] = m.Name
	}
	return k
}

// where names the node in messages.
func (n *Node) where() string {
	if n.Parent == nil {
		return "root"
	}
	return "key " + n.Path().String()
}

// Decoder reads a metadata tree. Its nodes, leaves, children and
// integers come from arenas, so that a small tree costs a handful of
// allocations, and its strings are substrings of one copy of the JSON.
type Decoder struct {
	p       jsonParser
	cfg     Limits
	entries int
	leafN   int
	class   string
	stLen   int

	// Nodes and children are handed out by pointer or while the children
	// of other nodes are being collected, so they come from arenas whose
	// chunks never move. Leaves and integers are read in runs, each
	// appended at the end of one growing slice and handed out with its
	// capacity capped, so later runs never write over it.
	nodes      arena[Node]
	childArena arena[Child]
	childBuf   []Child // a stack: the children of the nodes being read
	leafBuf    []Leaf
	ints       []int

	// First chunks of the above, allocated with the decoder: enough for a
	// small TensorDict.
	nodes0    [4]Node
	children0 [4]Child
	childBuf0 [4]Child
	leaves0   [4]Leaf
	ints0     [16]int
	all0      [8]*Leaf

	// sorted is every leaf in storage order (by start, then in document
	// order), once decode has succeeded.
	sorted []*Leaf
}

// init readies d, a zero decoder, to read meta.
func (d *Decoder) init(meta []byte, stLen int, cfg Limits) {
	d.p, d.cfg, d.stLen = newJSONParser(meta, cfg.MaxDepth), cfg, stLen
	d.nodes.buf = d.nodes0[:0]
	d.childArena.buf = d.children0[:0]
	d.childBuf = d.childBuf0[:0]
	d.leafBuf = d.leaves0[:0]
	d.ints = d.ints0[:0]
}

// intRun reads an array of non-negative integers into d.ints and returns
// it.
func (d *Decoder) intRun(what string) ([]int, error) {
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

// Decode parses and validates meta, consolidated metadata, against a
// storage of stLen bytes, within lim, and returns the tree and the
// tensorclass name (_tensorclass_type, "" if none). The tree is the
// caller's to keep.
//
// Everything is checked before use: the JSON size, nesting depth and entry
// count, dtype names, shapes (no negative sizes, no overflow), each leaf's
// stop - start == bytes + pad with pad < 8, ranges inside the storage and
// not overlapping, batch sizes that leaf shapes and nested batch sizes start
// with. Errors name the key (or "root"); limit errors match wire.ErrLimit.
func Decode(meta []byte, stLen int, lim Limits) (*Node, string, error) {
	return new(Decoder).Decode(meta, stLen, lim)
}

// decoderPool recycles the decoders of NewDecoder.
var decoderPool = sync.Pool{New: func() any { return new(Decoder) }}

// NewDecoder returns a decoder from a pool, for a tree that lives only
// while the caller uses it: Release hands it back.
func NewDecoder() *Decoder { return decoderPool.Get().(*Decoder) }

// Release returns d to the pool of NewDecoder. The tree it decoded must
// not be used afterwards.
func (d *Decoder) Release() {
	*d = Decoder{}
	decoderPool.Put(d)
}

// Decode is the function Decode, with d's arenas. A Decoder decodes once.
func (d *Decoder) Decode(meta []byte, stLen int, lim Limits) (*Node, string, error) {
	if len(meta) > lim.MaxMetadataBytes {
		return nil, "", fmt.Errorf("metadata is %d bytes, limit %d: %w", len(meta), lim.MaxMetadataBytes, wire.ErrLimit)
	}
	d.init(meta, stLen, lim)
	return d.decode()
}

// Sorted returns every leaf of the tree in storage order (by start, then
// in document order), once Decode has succeeded.
func (d *Decoder) Sorted() []*Leaf { return d.sorted }

// decode reads the metadata d was initialized with.
func (d *Decoder) decode() (*Node, string, error) {
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

func (d *Decoder) count(n *Node, name string) error {
	d.entries++
	if d.entries > d.cfg.MaxEntries {
		return fmt.Errorf("key %v: more than %d entries: %w", n.Path().child(name), d.cfg.MaxEntries, wire.ErrLimit)
	}
	return nil
}

// node reads one metadata level, the member name of parent (nil at the
// root).
func (d *Decoder) node(parent *Node, name string, top bool) (*Node, error) {
	p := &d.p
	n := d.nodes.one()
	n.Parent, n.Name, n.names = parent, name, -1
	if parent != nil {
		n.Level = parent.Level + 1
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
		n.Children = d.childArena.take(d.childBuf[mark:])
		clear(d.childBuf[mark:])
		d.childBuf = d.childBuf[:mark]
	}
	if !n.sawCls {
		return nil, fmt.Errorf("%s: no \"cls\" field", n.where())
	}
	if !n.sawCM {
		return nil, fmt.Errorf("%s: no \"cls_metadata\" field", n.where())
	}
	if n.stack {
		return n, nil // member converts it (see stack)
	}
	if !n.sawBatch {
		return nil, fmt.Errorf("%s: cls_metadata has no batch_size", n.where())
	}
	if n.names >= 0 && n.names != len(n.Batch) {
		return nil, fmt.Errorf("%s: %d names for batch size %v", n.where(), n.names, n.Batch)
	}
	if err := d.finish(n); err != nil {
		return nil, err
	}
	return n, nil
}

// finish checks node n, whose children are finished, against the storage
// and its parent's batch size, and sets its subtree counts.
func (d *Decoder) finish(n *Node) error {
	for i := range n.Leaves {
		if err := d.checkLeaf(n, &n.Leaves[i]); err != nil {
			return err
		}
	}
	for _, nt := range n.NonTensors {
		if nt.Stack != nil && !slices.Equal(nt.Stack.Shape, n.Batch) {
			return fmt.Errorf("key %v: NonTensorStack of batch size %v under batch size %v (a stack must have its parent's batch size)", n.Path().child(nt.Name), nt.Stack.Shape, n.Batch)
		}
	}
	n.SubNodes, n.SubEntries, n.SubDims = 1, len(n.NonTensors)+len(n.Leaves)+len(n.Children), len(n.Batch)
	for _, c := range n.Children {
		if !startsWith(c.Node.Batch, n.Batch) {
			return fmt.Errorf("key %v: batch size %v does not start with parent batch size %v", n.Path().child(c.Name), c.Node.Batch, n.Batch)
		}
		n.SubNodes += c.Node.SubNodes
		n.SubEntries += c.Node.SubEntries
		n.SubDims += c.Node.SubDims
	}
	return nil
}

// Check validates root, a tree that another reader built (one of the
// metadata Python pickles, say), against a storage of stLen bytes, as
// Decode validates the trees it reads: leaf dtypes, shapes and byte ranges,
// overlaps, batch-size prefixes. It fills in what Decode computes (Parent,
// Name and Level, each leaf's Node and NBytes, the subtree counts, each
// child's First) and returns the leaves in storage order. The builder sets
// Batch, Locked, NonTensors, Leaves (Name, DType, Shape, Start, Stop, Pad)
// and Children (Name, Node); it bounds the depth of what it builds.
func Check(root *Node, stLen int) ([]*Leaf, error) {
	d := &Decoder{stLen: stLen}
	if err := d.adopt(nil, root); err != nil {
		return nil, err
	}
	if err := d.checkOverlap(root); err != nil {
		return nil, err
	}
	return d.sorted, nil
}

// adopt links n under parent and checks its subtree, as Decode would have.
func (d *Decoder) adopt(parent, n *Node) error {
	n.Parent, n.Level = parent, 0
	if parent != nil {
		n.Level = parent.Level + 1
	}
	for i := range n.Leaves {
		n.Leaves[i].Node = n
	}
	for _, c := range n.Children {
		if c.Node == nil {
			return fmt.Errorf("key %v: no node", n.Path().child(c.Name))
		}
		c.Node.Name = c.Name
		if err := d.adopt(n, c.Node); err != nil {
			return err
		}
	}
	d.leafN += len(n.Leaves)
	return d.finish(n)
}

// nodeKeys and clsMetadataKeys are the members of a node and of its
// cls_metadata in the order tensordict writes them: the parser tries them
// first (the last one stands for the rest).
var (
	nodeKeys        = [...]string{"cls", "non_tensors", "leaves", "cls_metadata", ""}
	clsMetadataKeys = [...]string{"device", "names", "batch_size", "is_locked", ""}
)

// member reads the value of member key of node n.
func (d *Decoder) member(n *Node, key string, top bool) error {
	p := &d.p
	switch {
	case key == "cls":
		s, err := p.strHint("TensorDict")
		if err != nil {
			return err
		}
		switch {
		case s == "TensorDict":
		case s == "NonTensorStack" && !top:
			n.stack = true
		default:
			return fmt.Errorf("class %q is not supported (only TensorDict, and NonTensorStack below the root)", s)
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
			nt := NonTensor{Name: name}
			if nt.Value, nt.Batch, err = d.nonTensor(n, name); err != nil {
				break
			}
			n.NonTensors = append(n.NonTensors, nt)
		}
		return err
	case key == "leaves":
		start := len(d.leafBuf)
		more, err := p.openObject()
		for ; more && err == nil; more, err = p.nextMember() {
			var name string
			if name, err = p.key(); err != nil {
				break
			}
			if err = d.count(n, name); err != nil {
				break
			}
			if len(d.leafBuf) == cap(d.leafBuf) {
				d.growLeaves()
			}
			d.leafBuf = append(d.leafBuf, Leaf{})
			if err = d.leaf(n, name, &d.leafBuf[len(d.leafBuf)-1]); err != nil {
				break
			}
		}
		if err == nil && len(d.leafBuf) > start {
			run := d.leafBuf[start:len(d.leafBuf):len(d.leafBuf)]
			if n.Leaves == nil {
				n.Leaves = run
			} else {
				n.Leaves = append(n.Leaves, run...)
			}
			d.leafN += len(run)
		}
		return err
	case key == "cls_metadata":
		n.sawCM = true
		return d.clsMetadata(n)
	case key == "size" || (top && isTopLevelExtra(key)):
		if key == "_tensorclass_type" {
			if p.null() {
				return nil
			}
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
	if err == nil && c.stack {
		var st *Stack
		if st, err = d.stack(c); err == nil {
			n.NonTensors = append(n.NonTensors, NonTensor{Name: key, Batch: st.Shape, Stack: st, Child: n.children})
			return nil
		}
		err = fmt.Errorf("%s: %w", c.where(), err)
	}
	if err != nil {
		if _, placed := err.(placedError); !placed {
			err = placedError{err}
		}
		return err
	}
	d.childBuf = append(d.childBuf, Child{Name: key, Node: c})
	n.children++
	return nil
}

// growLeaves makes room in d.leafBuf, which is full, for the leaves the
// rest of the metadata may hold: half as many as it has opening brackets
// (a leaf has two, its own and its shape's), or, if that is fewer, as
// many as d.leafBuf holds (doubling it); within the entry limit and what
// the rest could hold at the shortest text of a leaf, so that the room is
// no larger than the leaves themselves could make it. A large node's
// leaves are then read into one slice, allocated once, instead of being
// copied at every growth.
func (d *Decoder) growLeaves() {
	n, rest := len(d.leafBuf), d.p.data[d.p.pos:]
	room := max(bytes.Count(rest, openBracket)/2, n, 1)
	room = min(room, d.cfg.MaxEntries-d.entries+1, len(rest)/minLeafText+1)
	d.leafBuf = append(make([]Leaf, 0, n+room), d.leafBuf...)
}

// openBracket is what growLeaves counts (bytes.Count of one byte is
// fast).
var openBracket = []byte{'['}

// minLeafText is the length of the shortest text of a leaf after its name:
// `:["bool",[],0,0,0],`.
const minLeafText = 19

// stack checks n, a NonTensorStack node, and returns its values: its
// elements are the non-tensor values (and nested stacks) "0" to "k-1", all
// of one batch size, stacked along stack_dim.
func (d *Decoder) stack(n *Node) (*Stack, error) {
	if len(n.Leaves) > 0 || len(n.Children) > 0 {
		return nil, errors.New("a NonTensorStack holds tensors or TensorDicts")
	}
	k := len(n.NonTensors)
	if k == 0 {
		return nil, errors.New("a NonTensorStack has no elements")
	}
	items := make([]*NonTensor, k)
	for i := range n.NonTensors {
		nt := &n.NonTensors[i]
		j, err := strconv.Atoi(nt.Name)
		if err != nil || j < 0 || j >= k || strconv.Itoa(j) != nt.Name || items[j] != nil {
			return nil, fmt.Errorf("element %q: the %d elements of a NonTensorStack are named 0 to %d", nt.Name, k, k-1)
		}
		items[j] = nt
	}
	ib := items[0].Batch
	for i, it := range items {
		if !slices.Equal(it.Batch, ib) {
			return nil, fmt.Errorf("element %d has batch size %v, element 0 has %v", i, it.Batch, ib)
		}
	}
	sd := n.stackDim
	if sd < 0 || sd > len(ib) {
		return nil, fmt.Errorf("stack_dim %d out of range for elements of batch size %v", sd, ib)
	}
	shape := slices.Insert(slices.Clone(ib), sd, k)
	total := 1
	for _, s := range shape {
		if s != 0 && total > (d.cfg.MaxEntries-d.entries)/s {
			return nil, fmt.Errorf("NonTensorStack of batch size %v: more than %d entries: %w", shape, d.cfg.MaxEntries, wire.ErrLimit)
		}
		total *= s
	}
	d.entries += total
	outer, inner := 1, 1
	for _, s := range ib[:sd] {
		outer *= s
	}
	for _, s := range ib[sd:] {
		inner *= s
	}
	st := &Stack{Shape: shape, Values: make([]any, total)}
	for o := range outer {
		for i, it := range items {
			run := st.Values[(o*k+i)*inner : (o*k+i+1)*inner]
			if it.Stack != nil {
				copy(run, it.Stack.Values[o*inner:(o+1)*inner])
				continue
			}
			for r := range run {
				run[r] = it.Value
			}
		}
	}
	return st, nil
}

// nonTensor reads [data, batch_size, device], the value of member name of
// non_tensors, and returns data and batch_size.
func (d *Decoder) nonTensor(n *Node, name string) (any, []int, error) {
	p := &d.p
	var v any
	var batch []int
	i := 0
	more, err := p.openArray()
	for ; more && err == nil; more, err = p.nextElem() {
		switch i {
		case 0:
			v, err = p.value()
		case 1:
			batch, err = d.intRun("batch size")
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
		return nil, nil, fmt.Errorf("non-tensor %v: %w", n.Path().child(name), err)
	}
	return v, batch, nil
}

// leaf reads [dtype, shape, start, stop, pad], the value of member name of
// leaves, into l.
func (d *Decoder) leaf(n *Node, name string, l *Leaf) error {
	p := &d.p
	l.Name, l.Node = name, n
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
			if l.DType, err = tensor.ParseDType(s); err != nil {
				err = fmt.Errorf("unsupported dtype %q", s)
			}
		case 1:
			l.Shape, err = d.intRun("shape")
		case 2:
			l.Start, err = p.integer()
		case 3:
			l.Stop, err = p.integer()
		case 4:
			l.Pad, err = p.integer()
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
		return fmt.Errorf("leaf %v: %w", n.Path().child(name), err)
	}
	return nil
}

// clsMetadata reads {"device", "names", "batch_size", "is_locked"}.
func (d *Decoder) clsMetadata(n *Node) error {
	p := &d.p
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
			n.Batch, err = d.intRun("batch size")
			n.sawBatch = true
		case "stack_dim":
			n.stackDim, err = p.integer()
		case "is_locked":
			n.Locked, err = p.boolean()
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
	return nil
}

// checkLeaf validates a leaf against its node's batch size and the storage.
func (d *Decoder) checkLeaf(n *Node, l *Leaf) error {
	if !startsWith(l.Shape, n.Batch) {
		return fmt.Errorf("leaf %v: shape %v does not start with batch size %v", n.Path().child(l.Name), l.Shape, n.Batch)
	}
	nb, err := tensor.NBytesOf(l.DType, l.Shape)
	if err != nil {
		return fmt.Errorf("leaf %v: %w", n.Path().child(l.Name), err)
	}
	l.NBytes = nb
	switch {
	case l.Pad < 0 || l.Pad >= 8:
		return fmt.Errorf("leaf %v: pad %d is not in [0, 8)", n.Path().child(l.Name), l.Pad)
	case l.Start < 0 || l.Stop < l.Start:
		return fmt.Errorf("leaf %v: bad byte range [%d, %d)", n.Path().child(l.Name), l.Start, l.Stop)
	case l.Stop-l.Start != nb+l.Pad || nb > l.Stop-l.Start:
		return fmt.Errorf("leaf %v: byte range [%d, %d) holds %d bytes, %v%v needs %d + pad %d", n.Path().child(l.Name), l.Start, l.Stop, l.Stop-l.Start, l.DType, l.Shape, nb, l.Pad)
	case l.Stop > d.stLen:
		return fmt.Errorf("leaf %v: byte range [%d, %d) is outside the storage of %d bytes", n.Path().child(l.Name), l.Start, l.Stop, d.stLen)
	}
	return nil
}

// checkOverlap refuses leaves whose byte ranges overlap, and sets the first
// offset of every child.
//
// It leaves the leaves in storage order in d.sorted.
func (d *Decoder) checkOverlap(root *Node) error {
	all := d.all0[:0]
	if d.leafN > len(d.all0) {
		all = make([]*Leaf, 0, d.leafN)
	}
	all, _ = collectLeaves(all, root)
	byStart := func(a, b *Leaf) int { return cmp.Compare(a.Start, b.Start) }
	if !slices.IsSortedFunc(all, byStart) {
		slices.SortStableFunc(all, byStart)
	}
	d.sorted = all
	var prev *Leaf
	for _, l := range all {
		if l.Stop == l.Start {
			continue
		}
		if prev != nil && l.Start < prev.Stop {
			return fmt.Errorf("leaf %v bytes [%d, %d) overlap leaf %v bytes [%d, %d)",
				l.Node.Path().child(l.Name), l.Start, l.Stop, prev.Node.Path().child(prev.Name), prev.Start, prev.Stop)
		}
		prev = l
	}
	return nil
}

// collectLeaves appends the leaves of n's subtree to all, each node's own
// leaves before its children's, sets the first offset of every child, and
// returns the subtree's first offset (-1 if it has no leaf).
func collectLeaves(all []*Leaf, n *Node) ([]*Leaf, int) {
	first := -1
	for i := range n.Leaves {
		l := &n.Leaves[i]
		all = append(all, l)
		if first < 0 || l.Start < first {
			first = l.Start
		}
	}
	for i := range n.Children {
		c := &n.Children[i]
		all, c.First = collectLeaves(all, c.Node)
		if c.First >= 0 && (first < 0 || c.First < first) {
			first = c.First
		}
	}
	return all, first
}

// startsWith reports whether s starts with prefix.
func startsWith(s, prefix []int) bool {
	return len(s) >= len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}
