package tensordict

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/tensor"
)

// consState records that a TensorDict node's leaves view one shared storage,
// packed from byte base up to end.
type consState struct {
	st        *tensor.Storage
	base, end int
	// part: the state of a nested TensorDict of a consolidated tree,
	// which views part of the storage its root owns (see Release).
	part bool
}

// Consolidate returns a new TensorDict whose tensor leaves all view one byte
// storage, as Python tensordict's consolidate(metadata=True) does: every
// leaf's C-contiguous little-endian bytes, depth first in insertion order,
// each followed by zeros up to a multiple of 8 bytes, complex128 leaves
// starting at a multiple of 16 (see Layout). The result has td's
// structure, batch sizes, lock state and class name, and shares no memory
// with td (non-tensor values are copied too). If td is already consolidated,
// Consolidate returns td itself.
//
// The storage (ConsolidatedStorage) and the metadata (ConsolidatedMetadata)
// are what InitRemote sends and SaveConsolidated writes.
func (td *TensorDict) Consolidate() (*TensorDict, error) {
	if td.IsConsolidated() {
		return td, nil
	}
	p, err := makePlan("Consolidate", td, 0, false)
	if err != nil {
		return nil, err
	}
	// The leaves and their pads tile the storage, so pack writes every
	// byte and the storage need not be cleared first.
	st, err := newFilledStorage(p.total)
	if err != nil {
		return nil, fmt.Errorf("tensordict: Consolidate: %w", err)
	}
	buf, _ := rawbytes.Of(st) // new: not released
	if err := pack(buf, p, true); err != nil {
		return nil, errors.Join(fmt.Errorf("tensordict: Consolidate: %w", err), st.Release())
	}
	c, err := viewsOf(p, st)
	mem.Received() // as a receive's: what the caller drops next comes back
	return c, err
}

// ConsolidateInto packs td's leaves, as Consolidate does, into buf, which
// must hold exactly the total size Layout reports and be 8-byte aligned. It
// returns a consolidated TensorDict whose leaves view buf as a new Storage
// (tensor.StorageOf). When buf lies in the memory of a live Storage outside
// the Go heap (the Bytes of an off-heap storage or a memory map), the new
// Storage refers to it: once that is released, the leaves report
// tensor.ErrReleased rather than touch unmapped memory, and a transfer
// into or from them under way keeps the memory until it ends. Other memory
// (from C, say) must stay valid as long as the leaves are used.
// ConsolidateIntoStorage gives the leaves the Storage itself.
func (td *TensorDict) ConsolidateInto(buf []byte) (*TensorDict, error) {
	return td.consolidateInto("ConsolidateInto", buf, nil)
}

// ConsolidateIntoStorage is ConsolidateInto into the whole of st, which
// must have exactly the total size Layout reports and be live. The leaves
// of the result view st itself, so a Release of st is seen by every use of
// them (tensor operations, Send, Broadcast into the result) as an error
// wrapping tensor.ErrReleased.
func (td *TensorDict) ConsolidateIntoStorage(st *tensor.Storage) (*TensorDict, error) {
	const op = "ConsolidateIntoStorage"
	if st == nil {
		return nil, fmt.Errorf("tensordict: %s: nil storage", op)
	}
	buf, err := liveStorageBytes(st)
	if err != nil {
		return nil, fmt.Errorf("tensordict: %s: %w", op, err)
	}
	return td.consolidateInto(op, buf, st)
}

// liveStorageBytes returns st's bytes, or an error wrapping
// tensor.ErrReleased.
func liveStorageBytes(st *tensor.Storage) ([]byte, error) {
	if st.Released() {
		return nil, tensor.ErrReleased
	}
	return st.Bytes(), nil
}

// consolidateInto packs td into buf, the bytes of st (nil: buf becomes a
// new heap Storage).
func (td *TensorDict) consolidateInto(op string, buf []byte, st *tensor.Storage) (*TensorDict, error) {
	p, err := makePlan(op, td, 0, false)
	if err != nil {
		return nil, err
	}
	if len(buf) != p.total {
		return nil, fmt.Errorf("tensordict: %s: buffer has %d bytes, layout needs %d", op, len(buf), p.total)
	}
	if len(buf) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%8 != 0 {
		return nil, fmt.Errorf("tensordict: %s: buffer is not 8-byte aligned", op)
	}
	if err := pack(buf, p, true); err != nil {
		return nil, fmt.Errorf("tensordict: %s: %w", op, err)
	}
	if st == nil {
		st = tensor.StorageOf(buf)
	}
	return viewsOf(p, st)
}

// viewsOf builds the consolidated TensorDict of plan p over st. The
// TensorDicts, their entries, batch sizes and consolidation states share
// one allocation each.
func viewsOf(p *plan, st *tensor.Storage) (*TensorDict, error) {
	entries, dims := 0, 0
	for i := range p.nodes {
		entries += len(p.nodes[i].td.entries)
		dims += len(p.nodes[i].td.batch)
	}
	v := viewBuilder{
		p:       p,
		st:      st,
		tds:     make([]TensorDict, len(p.nodes)),
		cons:    make([]consState, len(p.nodes)),
		entries: make([]entry, entries),
		batches: make([]int, dims),
	}
	root, _, err := v.build(0)
	if err != nil {
		return nil, err
	}
	root.cons.base, root.cons.end = 0, st.Len()
	return root, nil
}

// viewBuilder makes the TensorDicts of viewsOf; path is the key of the node
// being built, for messages.
type viewBuilder struct {
	p       *plan
	st      *tensor.Storage
	tds     []TensorDict // one per node, in pre-order
	cons    []consState  // one per node, in pre-order
	entries []entry      // not yet handed out
	batches []int        // not yet handed out
	shape   []int        // scratch
	path    []string
}

// build makes the TensorDict of node ni and returns it with the index of
// the node after its subtree.
func (v *viewBuilder) build(ni int) (*TensorDict, int, error) {
	n := &v.p.nodes[ni]
	src := n.td
	out := &v.tds[ni]
	nb, ne := len(src.batch), len(src.entries)
	out.batch = v.batches[:nb:nb]
	copy(out.batch, src.batch)
	out.entries = v.entries[:0:ne]
	out.index = newIndex(ne)
	v.batches, v.entries = v.batches[nb:], v.entries[ne:]
	out.class, out.locked = src.class, src.locked
	li, ci := n.leaf0, ni+1
	first, last := -1, -1
	for i := range src.entries {
		e := &src.entries[i]
		switch e.kind {
		case kindTensor:
			l := &v.p.leaves[li]
			li++
			v.shape = v.shape[:0]
			for d := range l.t.Dim() {
				v.shape = append(v.shape, l.t.Size(d))
			}
			t, err := tensor.FromStorage(l.t.DType(), v.st, l.start, v.shape...)
			if err != nil {
				return nil, 0, fmt.Errorf("key %v: %w", append(Key(slices.Clone(v.path)), e.name), err)
			}
			out.appendNew(entry{name: e.name, kind: kindTensor, t: t})
			if first < 0 {
				first = l.start
			}
			last = l.start + l.nbytes + l.pad
		case kindTD:
			v.path = append(v.path, e.name)
			sub, next, err := v.build(ci)
			v.path = v.path[:len(v.path)-1]
			if err != nil {
				return nil, 0, err
			}
			li += v.p.nodes[ci].leaves
			ci = next
			out.appendNew(entry{name: e.name, kind: kindTD, td: sub})
			if sub.cons.base < sub.cons.end {
				if first < 0 {
					first = sub.cons.base
				}
				last = sub.cons.end
			}
		case kindNonTensor:
			out.appendNew(entry{name: e.name, kind: kindNonTensor, v: cloneValue(e.v)})
		}
	}
	if first < 0 {
		first, last = 0, 0
	}
	cs := &v.cons[ni]
	*cs = consState{st: v.st, base: first, end: last, part: ni > 0}
	out.cons = cs
	return out, ni + n.nodes, nil
}

// IsConsolidated reports whether td's leaves all still view the storage that
// Consolidate, ConsolidateInto, FromConsolidated or LoadConsolidated gave it,
// contiguously and in depth-first order, without overlap. Replacing or adding
// a leaf (other than by SetInPlace) ends consolidation.
func (td *TensorDict) IsConsolidated() bool {
	if td == nil {
		return false
	}
	c := td.cons
	if c == nil || c.st.Released() {
		return false
	}
	cursor := c.base
	return packsInto(td, c.st, &cursor) && cursor <= c.end && c.end <= c.st.Len()
}

// packsInto reports whether td's leaves, depth first, view st contiguously
// at increasing 8-aligned offsets from *cursor, which it advances.
func packsInto(td *TensorDict, st *tensor.Storage, cursor *int) bool {
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			t := e.t
			if t.Storage() != st || t.Offset() < *cursor || t.Offset()%8 != 0 || !t.IsContiguous() {
				return false
			}
			nb := t.NBytes()
			*cursor = t.Offset() + nb + padTo8(nb)
		case kindTD:
			if !packsInto(e.td, st, cursor) {
				return false
			}
		}
	}
	return true
}

// ConsolidatedStorage returns the storage that td's leaves view if td is
// consolidated, and nil otherwise.
func (td *TensorDict) ConsolidatedStorage() *tensor.Storage {
	if !td.IsConsolidated() {
		return nil
	}
	return td.cons.st
}

// ConsolidatedMetadata returns the metadata tree of a consolidated td as JSON,
// exactly Python tensordict's consolidated metadata (the dict its
// consolidate(metadata=True) stores, which TensorDict.from_consolidated
// reads): for each level, in this order, "cls" ("TensorDict"), "non_tensors"
// ({key: [value, batch_size, null]}), "leaves" ({key: [dtype, shape, start,
// stop, pad]}, with dtypes such as "torch.float32" and byte offsets into the
// storage), "cls_metadata" ({"device": null, "names": [null, ...],
// "batch_size": [...], "is_locked": bool}), then one member per nested
// TensorDict holding its own tree. Keys keep insertion order. Transport
// fields (total size, class name) are not part of it.
func (td *TensorDict) ConsolidatedMetadata() ([]byte, error) {
	if !td.IsConsolidated() {
		return nil, fmt.Errorf("tensordict: ConsolidatedMetadata: tensordict is not consolidated")
	}
	return withPlan("ConsolidatedMetadata", td, true, func(p *plan) ([]byte, error) { return p.appendMetadata(nil) })
}

// parallelThreshold is the storage size from which pack copies with several
// goroutines.
const parallelThreshold = 4 << 20

// chunkSize is the largest piece of one leaf a pack worker copies at once.
const chunkSize = 2 << 20

// copyTask is one piece of pack's work: bytes [from, to) of a leaf.
type copyTask struct {
	l        *planLeaf
	from, to int
}

// pack copies the leaves of p into buf at their planned offsets. With
// zeroPads, the pad bytes are written too (buf may hold old data); a fresh
// storage is already zero.
//
// A fault on a mapped leaf or buf (a file truncated by another process) is
// an error wrapping memmap.ErrFault, not the end of the process.
func pack(buf []byte, p *plan, zeroPads bool) error {
	return mem.CatchFault(func() error {
		if p.total < parallelThreshold || runtime.GOMAXPROCS(0) < 2 {
			return packSerial(buf, p, zeroPads)
		}
		return packParallel(buf, p, zeroPads)
	})
}

// packSerial is pack on one goroutine: leaf by leaf, without a task list.
func packSerial(buf []byte, p *plan, zeroPads bool) error {
	for i := range p.leaves {
		l := &p.leaves[i]
		if !l.prepare(buf, zeroPads) {
			continue
		}
		to := l.nbytes
		if !l.t.IsContiguous() {
			to = -1
		}
		if err := (copyTask{l: l, from: 0, to: to}).do(buf); err != nil {
			return err
		}
	}
	return nil
}

// packParallel is pack with GOMAXPROCS goroutines sharing chunks of the
// leaves; each worker catches its own faults.
func packParallel(buf []byte, p *plan, zeroPads bool) error {
	var tasks []copyTask
	for i := range p.leaves {
		l := &p.leaves[i]
		if !l.prepare(buf, zeroPads) {
			continue
		}
		if !l.t.IsContiguous() {
			tasks = append(tasks, copyTask{l: l, from: 0, to: -1})
			continue
		}
		for from := 0; from < l.nbytes; from += chunkSize {
			tasks = append(tasks, copyTask{l: l, from: from, to: min(from+chunkSize, l.nbytes)})
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	workers := runtime.GOMAXPROCS(0)
	if p.total < parallelThreshold || workers < 2 || len(tasks) < 2 {
		workers = 1
	}
	workers = min(workers, len(tasks))
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	run := func() {
		defer wg.Done()
		if err := mem.CatchFault(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tasks) {
					return nil
				}
				if err := tasks[i].do(buf); err != nil {
					fail(err)
				}
			}
		}); err != nil {
			fail(err)
		}
	}
	wg.Add(workers)
	for w := 1; w < workers; w++ {
		go run()
	}
	run()
	wg.Wait()
	return first
}

// prepare clears l's pads in buf if zeroPads (buf may hold old data; a
// fresh storage is already zero) and reports whether l has bytes to copy.
func (l *planLeaf) prepare(buf []byte, zeroPads bool) bool {
	if zeroPads {
		l.clearPads(buf)
	}
	return l.nbytes > 0
}

// clearPads zeroes the bytes of buf around leaf l that no leaf owns: the
// gap before it and the pad after it.
func (l *planLeaf) clearPads(buf []byte) {
	clear(buf[l.start-l.gap : l.start])
	clear(buf[l.start+l.nbytes : l.start+l.nbytes+l.pad])
}

// do performs one copy task.
func (c copyTask) do(buf []byte) error {
	l := c.l
	if c.to < 0 { // a whole non-contiguous leaf: gather it into place
		dst, err := tensor.FromStorage(l.t.DType(), tensor.StorageOf(buf), l.start, l.t.Shape()...)
		if err != nil {
			return fmt.Errorf("leaf %q: %w", l.name, err)
		}
		if err := dst.CopyFrom(l.t); err != nil {
			return fmt.Errorf("leaf %q: %w", l.name, err)
		}
		return nil
	}
	src, err := l.t.Bytes()
	if err != nil {
		return fmt.Errorf("leaf %q: %w", l.name, err)
	}
	copy(buf[l.start+c.from:l.start+c.to], src[c.from:c.to])
	return nil
}

// encodeMetadata writes the consolidated metadata tree of p as JSON (see
// codec.AppendNodeStart): cls, non_tensors, leaves, cls_metadata, then one child
// node per nested TensorDict, in insertion order.
func encodeMetadata(p *plan) ([]byte, error) { return p.appendMetadata(nil) }

// appendMetadata appends the metadata of p to dst (allocating, when dst
// has too little room, a buffer sized for the tree).
func (p *plan) appendMetadata(dst []byte) ([]byte, error) {
	if n := codec.MetadataSize(len(p.nodes), len(p.leaves)); cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	b, _, err := p.appendNode(dst, 0)
	return b, err
}

// appendNode appends the metadata of node ni and its subtree, and returns
// the index of the node after the subtree.
func (p *plan) appendNode(b []byte, ni int) ([]byte, int, error) {
	n := &p.nodes[ni]
	td := n.td
	b = codec.AppendNodeStart(b)
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindNonTensor && !isStack(e.v) {
			var err error
			if b, err = codec.AppendNonTensor(b, e.name, e.v, td.batch); err != nil {
				return nil, 0, fmt.Errorf("tensordict: metadata: %w", err)
			}
		}
	}
	b = codec.AppendLeavesStart(b)
	li, ci := n.leaf0, ni+1
	for i := range td.entries {
		switch td.entries[i].kind {
		case kindTensor:
			l := &p.leaves[li]
			li++
			b = codec.AppendLeaf(b, l.name, l.t, l.start, l.start+l.nbytes+l.pad, l.pad)
		case kindTD:
			li += p.nodes[ci].leaves
			ci += p.nodes[ci].nodes
		}
	}
	b = codec.AppendNodeMetadata(b, td.batch, td.locked)
	ci = ni + 1
	for i := range td.entries {
		var err error
		switch e := &td.entries[i]; {
		case e.kind == kindTD:
			b = codec.AppendChild(b, e.name)
			if b, ci, err = p.appendNode(b, ci); err != nil {
				return nil, 0, err
			}
		case e.kind == kindNonTensor && isStack(e.v):
			s := e.v.(*NonTensorStack)
			b = codec.AppendChild(b, e.name)
			if b, err = appendStack(b, s.shape, s.values); err != nil {
				return nil, 0, fmt.Errorf("tensordict: metadata: non-tensor stack %q: %w", e.name, err)
			}
		}
	}
	return codec.AppendNodeEnd(b), ni + n.nodes, nil
}

// isStack reports whether non-tensor value v is a NonTensorStack.
func isStack(v any) bool {
	_, ok := v.(*NonTensorStack)
	return ok
}

// appendStack appends the metadata node of the stack of shape holding
// values (row-major; shape has a dimension, and values are not empty), as
// Python tensordict lays a NonTensorStack out: stacked along dimension 0,
// each element a non-tensor value when its values are all equal and a
// nested stack otherwise (see codec.AppendStackStart).
func appendStack(b []byte, shape []int, values []any) ([]byte, error) {
	n, rest := shape[0], shape[1:]
	run := len(values) / n
	b = codec.AppendStackStart(b)
	var nested []int
	for i := range n {
		part := values[i*run : (i+1)*run]
		if len(rest) > 0 && !plainEqual(part) {
			nested = append(nested, i)
			continue
		}
		var err error
		if b, err = codec.AppendNonTensor(b, strconv.Itoa(i), part[0], rest); err != nil {
			return nil, err
		}
	}
	b = codec.AppendStackMetadata(b)
	for _, i := range nested {
		b = codec.AppendChild(b, strconv.Itoa(i))
		var err error
		if b, err = appendStack(b, rest, values[i*run:(i+1)*run]); err != nil {
			return nil, err
		}
	}
	return codec.AppendNodeEnd(b), nil
}

// isReserved reports whether name is a metadata field of a consolidated
// node (or a transport extra Python adds at the top). A nested TensorDict
// with one of these names would be mistaken for them, so Layout refuses it.
func isReserved(name string) bool {
	switch name {
	case "cls", "non_tensors", "leaves", "cls_metadata",
		"_total_bytes", "_tensorclass_type", "_storage_device", "_max_bytes", "size":
		return true
	}
	return false
}

// planLeaf is one tensor leaf placed in the consolidated storage.
type planLeaf struct {
	name   string
	t      *tensor.Tensor
	start  int // byte offset of the first element
	nbytes int // numel * itemsize
	pad    int // zero bytes after the data, so the next leaf is 8-aligned
	gap    int // zero bytes before start, so a complex128 leaf is 16-aligned
}

// planNode is one TensorDict level of a plan. Nodes are kept in pre-order
// (a node, then the subtrees of its nested TensorDicts in insertion order),
// so a node's subtree is the nodes that follow it, up to its node count.
type planNode struct {
	td     *TensorDict
	leaf0  int // index in plan.leaves of the subtree's first leaf
	leaves int // leaves in the subtree
	nodes  int // nodes in the subtree, this one included
}

// plan is a whole consolidation plan: the nodes in pre-order and the leaves
// in packing order (depth first, insertion order).
type plan struct {
	nodes  []planNode
	leaves []planLeaf
	total  int

	// Room for a small TensorDict, allocated with the plan.
	nodes0  [4]planNode
	leaves0 [4]planLeaf
	path0   [4]string // the planner's key stack
}

// padTo8 returns the zero bytes that follow n bytes of data.
func padTo8(n int) int { return (8 - n%8) % 8 }

// leafStart returns the offset at which a leaf of dtype dt is placed when
// the previous one ends (pad included) at off, an 8-aligned offset. Every
// leaf is 8-aligned, as in tensordict; a complex128 leaf is 16-aligned,
// since torch views bytes as complex128 only at offsets that are multiples
// of 16 (Python's from_consolidated fails on a complex128 leaf at 8). The
// bytes skipped are zeros that belong to no leaf: each leaf's stop - start
// stays its bytes + pad, so readers of either alignment accept the layout,
// and this package reads layouts of both.
func leafStart(off int, dt tensor.DType) int {
	if dt == tensor.Complex128 {
		return (off + 15) &^ 15
	}
	return off
}

// maxPlanDepth bounds the nesting of TensorDicts Layout accepts, matching the
// default metadata depth limit of FromConsolidated.
const maxPlanDepth = codec.DefaultMaxDepth - 8

// makePlan lays out td's leaves from byte offset base. With useOffsets, each
// leaf's start is its current offset in its storage (for a TensorDict that
// is already consolidated) instead of the running offset.
func makePlan(op string, td *TensorDict, base int, useOffsets bool) (*plan, error) {
	p := new(plan)
	if err := p.fill(op, td, base, useOffsets); err != nil {
		return nil, err
	}
	return p, nil
}

// fill lays out td into p, an empty plan, as makePlan does.
func (p *plan) fill(op string, td *TensorDict, base int, useOffsets bool) error {
	if td == nil {
		return nilError(op)
	}
	nodes, leaves := countTree(td, 0)
	p.total = base
	p.nodes, p.leaves = p.nodes0[:0], p.leaves0[:0]
	if nodes > len(p.nodes0) {
		p.nodes = make([]planNode, 0, nodes)
	}
	if leaves > len(p.leaves0) {
		p.leaves = make([]planLeaf, 0, leaves)
	}
	pl := planner{op: op, useOffsets: useOffsets, p: p, path: p.path0[:0]}
	return pl.node(td, 0)
}

// planPool recycles the plans of small TensorDicts for the calls that use
// a plan only while they run.
var planPool = sync.Pool{New: func() any { return new(plan) }}

// withPlan lays out td as makePlan does and calls f with the plan, which f
// must not keep.
func withPlan[T any](op string, td *TensorDict, useOffsets bool, f func(p *plan) (T, error)) (T, error) {
	p := planPool.Get().(*plan)
	defer func() {
		small := cap(p.nodes) <= len(p.nodes0) && cap(p.leaves) <= len(p.leaves0)
		*p = plan{}
		if small {
			planPool.Put(p)
		}
	}()
	if err := p.fill(op, td, 0, useOffsets); err != nil {
		var zero T
		return zero, err
	}
	return f(p)
}

// countTree returns the number of nodes and leaves of td's tree, looking no
// deeper than makePlan accepts.
func countTree(td *TensorDict, depth int) (nodes, leaves int) {
	nodes = 1
	if depth > maxPlanDepth {
		return nodes, 0
	}
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTensor:
			leaves++
		case kindTD:
			n, l := countTree(e.td, depth+1)
			nodes += n
			leaves += l
		}
	}
	return nodes, leaves
}

// planner builds a plan; path is the key of the node being planned, for
// messages.
type planner struct {
	op         string
	useOffsets bool
	p          *plan
	path       []string
}

// key returns the key of entry name of the node being planned.
func (pl *planner) key(name string) Key {
	return append(append(make(Key, 0, len(pl.path)+1), pl.path...), name)
}

func (pl *planner) node(td *TensorDict, depth int) error {
	p := pl.p
	if depth > maxPlanDepth {
		return fmt.Errorf("tensordict: %s: key %v: nested deeper than %d levels", pl.op, Key(slices.Clone(pl.path)), maxPlanDepth)
	}
	ni := len(p.nodes)
	p.nodes = append(p.nodes, planNode{td: td, leaf0: len(p.leaves)})
	for i := range td.entries {
		e := &td.entries[i]
		if !utf8.ValidString(e.name) {
			return fmt.Errorf("tensordict: %s: key %v is not valid UTF-8", pl.op, pl.key(e.name))
		}
		switch e.kind {
		case kindTensor:
			nb := e.t.NBytes()
			if e.t.Storage().Released() {
				return fmt.Errorf("tensordict: %s: key %v: %w", pl.op, pl.key(e.name), tensor.ErrReleased)
			}
			start := leafStart(p.total, e.t.DType())
			if pl.useOffsets {
				start = e.t.Offset()
			}
			pad := padTo8(nb)
			p.leaves = append(p.leaves, planLeaf{name: e.name, t: e.t, start: start, nbytes: nb, pad: pad, gap: max(start-p.total, 0)})
			p.total = start + nb + pad
		case kindTD:
			if isReserved(e.name) {
				return fmt.Errorf("tensordict: %s: nested tensordict %v has a name reserved by the consolidated metadata", pl.op, pl.key(e.name))
			}
			pl.path = append(pl.path, e.name)
			err := pl.node(e.td, depth+1)
			pl.path = pl.path[:len(pl.path)-1]
			if err != nil {
				return err
			}
		}
	}
	n := &p.nodes[ni]
	n.leaves = len(p.leaves) - n.leaf0
	n.nodes = len(p.nodes) - ni
	return nil
}

// flatten returns the plan's leaves in storage order.
func (p *plan) flatten() []planLeaf { return p.leaves }

// Layout returns the consolidated metadata (JSON, see ConsolidatedMetadata)
// and the storage size that Consolidate would produce for td, without copying
// any data. It lets a caller allocate the storage itself (off-heap, in a
// memory-mapped file, in an MPI window) and fill it with ConsolidateInto.
func Layout(td *TensorDict) (meta []byte, totalBytes int, err error) {
	return appendLayout("Layout", nil, td)
}

// appendLayout appends td's consolidated metadata, as Layout returns it, to
// dst and returns the result with the storage size. For a small TensorDict
// and a dst with room, it does not allocate.
func appendLayout(op string, dst []byte, td *TensorDict) ([]byte, int, error) {
	var total int
	meta, err := withPlan(op, td, false, func(p *plan) ([]byte, error) {
		total = p.total
		return p.appendMetadata(dst)
	})
	if err != nil {
		return nil, 0, err
	}
	return meta, total, nil
}
