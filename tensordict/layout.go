package tensordict

import (
	"fmt"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/tensor"
)

// reservedNames are metadata fields of a consolidated node (and the transport
// extras Python adds at the top). A nested TensorDict with one of these names
// would be mistaken for them, so Layout refuses it.
var reservedNames = map[string]bool{
	"cls": true, "non_tensors": true, "leaves": true, "cls_metadata": true,
	"_total_bytes": true, "_tensorclass_type": true, "_storage_device": true,
	"_max_bytes": true, "size": true,
}

// planLeaf is one tensor leaf placed in the consolidated storage.
type planLeaf struct {
	name   string
	t      *tensor.Tensor
	start  int // byte offset of the first element
	nbytes int // numel * itemsize
	pad    int // zero bytes after the data, so the next leaf is 8-aligned
}

// planChild is a nested TensorDict of a planNode.
type planChild struct {
	name string
	node *planNode
}

// planNode is the consolidation plan of one TensorDict level.
type planNode struct {
	td       *TensorDict
	leaves   []planLeaf
	children []planChild
}

// plan is a whole consolidation plan: the tree and its leaves in packing
// order (depth first, insertion order).
type plan struct {
	root  *planNode
	flat  []*planLeaf
	total int
}

// padTo8 returns the zero bytes that follow n bytes of data.
func padTo8(n int) int { return (8 - n%8) % 8 }

// makePlan lays out td's leaves from byte offset base. With useOffsets, each
// leaf's start is its current offset in its storage (for a TensorDict that
// is already consolidated) instead of the running offset.
func makePlan(op string, td *TensorDict, base int, useOffsets bool) (*plan, error) {
	p := &plan{total: base}
	root, err := p.node(op, nil, td, 0, useOffsets)
	if err != nil {
		return nil, err
	}
	p.root = root
	return p, nil
}

// maxPlanDepth bounds the nesting of TensorDicts Layout accepts, matching the
// default metadata depth limit of FromConsolidated.
const maxPlanDepth = defaultMaxDepth - 8

func (p *plan) node(op string, prefix Key, td *TensorDict, depth int, useOffsets bool) (*planNode, error) {
	if depth > maxPlanDepth {
		return nil, fmt.Errorf("tensordict: %s: key %v: nested deeper than %d levels", op, prefix, maxPlanDepth)
	}
	n := &planNode{td: td}
	for i := range td.entries {
		e := &td.entries[i]
		if !utf8.ValidString(e.name) {
			return nil, fmt.Errorf("tensordict: %s: key %v is not valid UTF-8", op, prefix.child(e.name))
		}
		switch e.kind {
		case kindTensor:
			nb := e.t.NBytes()
			if e.t.Storage().Released() {
				return nil, fmt.Errorf("tensordict: %s: key %v: storage was released", op, prefix.child(e.name))
			}
			start := p.total
			if useOffsets {
				start = e.t.Offset()
			}
			pad := padTo8(nb)
			n.leaves = append(n.leaves, planLeaf{name: e.name, t: e.t, start: start, nbytes: nb, pad: pad})
			p.total = start + nb + pad
		case kindTD:
			if reservedNames[e.name] {
				return nil, fmt.Errorf("tensordict: %s: nested tensordict %v has a name reserved by the consolidated metadata", op, prefix.child(e.name))
			}
			c, err := p.node(op, prefix.child(e.name), e.td, depth+1, useOffsets)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, planChild{name: e.name, node: c})
		}
	}
	return n, nil
}

// flatten returns the plan's leaves in storage order.
func (p *plan) flatten() []*planLeaf {
	if p.flat != nil {
		return p.flat
	}
	var walk func(n *planNode)
	walk = func(n *planNode) {
		li, ci := 0, 0
		for i := range n.td.entries {
			switch n.td.entries[i].kind {
			case kindTensor:
				p.flat = append(p.flat, &n.leaves[li])
				li++
			case kindTD:
				walk(n.children[ci].node)
				ci++
			}
		}
	}
	walk(p.root)
	return p.flat
}

// Layout returns the consolidated metadata (JSON, see ConsolidatedMetadata)
// and the storage size that Consolidate would produce for td, without copying
// any data. It lets a caller allocate the storage itself (off-heap, in a
// memory-mapped file, in an MPI window) and fill it with ConsolidateInto.
func Layout(td *TensorDict) (meta []byte, totalBytes int, err error) {
	p, err := makePlan("Layout", td, 0, false)
	if err != nil {
		return nil, 0, err
	}
	meta, err = encodeMetadata(p)
	if err != nil {
		return nil, 0, err
	}
	return meta, p.total, nil
}
