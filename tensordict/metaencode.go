package tensordict

import (
	"fmt"
	"strconv"

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
