package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/codec"
)

// encodeMetadata writes the consolidated metadata tree of p as JSON (see
// codec.Writer): cls, non_tensors, leaves, cls_metadata, then one child
// node per nested TensorDict, in insertion order.
func encodeMetadata(p *plan) ([]byte, error) { return p.appendMetadata(nil) }

// appendMetadata appends the metadata of p to dst (allocating, when dst
// has too little room, a buffer sized for the tree).
func (p *plan) appendMetadata(dst []byte) ([]byte, error) {
	w := codec.Writer{B: dst}
	w.Grow(len(p.nodes), len(p.leaves))
	if _, err := p.writeNode(&w, 0); err != nil {
		return nil, err
	}
	return w.B, nil
}

// writeNode writes the metadata of node ni and its subtree, and returns
// the index of the node after the subtree.
func (p *plan) writeNode(w *codec.Writer, ni int) (int, error) {
	n := &p.nodes[ni]
	td := n.td
	w.BeginNode()
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindNonTensor {
			if err := w.NonTensor(e.name, e.v, td.batch); err != nil {
				return 0, fmt.Errorf("tensordict: metadata: %w", err)
			}
		}
	}
	w.BeginLeaves()
	li, ci := n.leaf0, ni+1
	for i := range td.entries {
		switch td.entries[i].kind {
		case kindTensor:
			l := &p.leaves[li]
			li++
			var dims [8]int
			w.Leaf(l.name, l.t.DType(), shapeInto(dims[:0], l.t), l.start, l.start+l.nbytes+l.pad, l.pad)
		case kindTD:
			li += p.nodes[ci].leaves
			ci += p.nodes[ci].nodes
		}
	}
	w.EndLeaves(td.batch, td.locked)
	ci = ni + 1
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD {
			w.Child(e.name)
			var err error
			if ci, err = p.writeNode(w, ci); err != nil {
				return 0, err
			}
		}
	}
	w.EndNode()
	return ni + n.nodes, nil
}
