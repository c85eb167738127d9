package tensordict

import (
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

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
