package tensordict

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tdmpi/tdmpi/tensor"
)

// consState records that a TensorDict node's leaves view one shared storage,
// packed from byte base up to end.
type consState struct {
	st        *tensor.Storage
	base, end int
}

// Consolidate returns a new TensorDict whose tensor leaves all view one byte
// storage, as Python tensordict's consolidate(metadata=True) does: every
// leaf's C-contiguous little-endian bytes, depth first in insertion order,
// each followed by zeros up to a multiple of 8 bytes. The result has td's
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
	st := tensor.NewStorage(p.total)
	if err := pack(st.Bytes(), p, false); err != nil {
		return nil, fmt.Errorf("tensordict: Consolidate: %w", err)
	}
	return viewsOf(p, st)
}

// ConsolidateInto packs td's leaves, as Consolidate does, into buf, which
// must hold exactly the total size Layout reports and be 8-byte aligned (a
// memory map or an off-heap buffer is). It returns a consolidated TensorDict
// whose leaves view buf; buf must stay valid as long as it is used.
func (td *TensorDict) ConsolidateInto(buf []byte) (*TensorDict, error) {
	p, err := makePlan("ConsolidateInto", td, 0, false)
	if err != nil {
		return nil, err
	}
	if len(buf) != p.total {
		return nil, fmt.Errorf("tensordict: ConsolidateInto: buffer has %d bytes, layout needs %d", len(buf), p.total)
	}
	if len(buf) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%8 != 0 {
		return nil, fmt.Errorf("tensordict: ConsolidateInto: buffer is not 8-byte aligned")
	}
	if err := pack(buf, p, true); err != nil {
		return nil, fmt.Errorf("tensordict: ConsolidateInto: %w", err)
	}
	return viewsOf(p, tensor.StorageOf(buf))
}

// viewsOf builds the consolidated TensorDict of plan p over st.
func viewsOf(p *plan, st *tensor.Storage) (*TensorDict, error) {
	var build func(prefix Key, n *planNode) (*TensorDict, error)
	build = func(prefix Key, n *planNode) (*TensorDict, error) {
		src := n.td
		out := newTD(src.batch)
		out.class, out.locked = src.class, src.locked
		out.entries = make([]entry, 0, len(src.entries))
		li, ci := 0, 0
		first, last := -1, -1
		for i := range src.entries {
			e := &src.entries[i]
			switch e.kind {
			case kindTensor:
				l := &n.leaves[li]
				li++
				v, err := tensor.FromStorage(l.t.DType(), st, l.start, l.t.Shape()...)
				if err != nil {
					return nil, fmt.Errorf("key %v: %w", prefix.child(e.name), err)
				}
				out.add(e.name, entry{kind: kindTensor, t: v})
				if first < 0 {
					first = l.start
				}
				last = l.start + l.nbytes + l.pad
			case kindTD:
				c := n.children[ci]
				ci++
				sub, err := build(prefix.child(e.name), c.node)
				if err != nil {
					return nil, err
				}
				out.add(e.name, entry{kind: kindTD, td: sub})
				if sub.cons.base < sub.cons.end {
					if first < 0 {
						first = sub.cons.base
					}
					last = sub.cons.end
				}
			case kindNonTensor:
				out.add(e.name, entry{kind: kindNonTensor, v: cloneValue(e.v)})
			}
		}
		if first < 0 {
			first, last = 0, 0
		}
		out.cons = &consState{st: st, base: first, end: last}
		return out, nil
	}
	root, err := build(nil, p.root)
	if err != nil {
		return nil, err
	}
	root.cons.base, root.cons.end = 0, st.Len()
	return root, nil
}

// IsConsolidated reports whether td's leaves all still view the storage that
// Consolidate, ConsolidateInto, FromConsolidated or LoadConsolidated gave it,
// contiguously and in depth-first order, without overlap. Replacing or adding
// a leaf (other than by SetInPlace) ends consolidation.
func (td *TensorDict) IsConsolidated() bool {
	c := td.cons
	if c == nil || c.st.Released() {
		return false
	}
	cursor := c.base
	err := td.walkLeaves(nil, func(_ Key, n *TensorDict, j int) error {
		t := n.entries[j].t
		if t.Storage() != c.st || !t.IsContiguous() || t.Offset() < cursor || t.Offset()%8 != 0 {
			return errStop
		}
		cursor = t.Offset() + t.NBytes() + padTo8(t.NBytes())
		return nil
	})
	return err == nil && cursor <= c.end && c.end <= c.st.Len()
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
	p, err := makePlan("ConsolidatedMetadata", td, 0, true)
	if err != nil {
		return nil, err
	}
	return encodeMetadata(p)
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
func pack(buf []byte, p *plan, zeroPads bool) error {
	flat := p.flatten()
	var tasks []copyTask
	for _, l := range flat {
		if zeroPads {
			clear(buf[l.start+l.nbytes : l.start+l.nbytes+l.pad])
		}
		if l.nbytes == 0 {
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
	run := func() {
		defer wg.Done()
		for {
			i := int(next.Add(1)) - 1
			if i >= len(tasks) {
				return
			}
			if err := tasks[i].do(buf); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
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
