package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/codec"
)

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
		if e := &td.entries[i]; e.kind == kindNonTensor {
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
		if e := &td.entries[i]; e.kind == kindTD {
			b = codec.AppendChild(b, e.name)
			var err error
			if b, ci, err = p.appendNode(b, ci); err != nil {
				return nil, 0, err
			}
		}
	}
	return codec.AppendNodeEnd(b), ni + n.nodes, nil
}
