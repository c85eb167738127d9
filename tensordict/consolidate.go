package tensordict

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
