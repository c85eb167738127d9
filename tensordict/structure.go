package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/codec"
)

// structureOf returns td's structure, its leaves in storage order. The
// keys share one backing array, and so do the shapes.
func structureOf(td *TensorDict) codec.Structure {
	b := structBuilder{s: codec.Structure{Batch: td.batch}}
	b.walk(td, 0)
	return b.s
}

// structBuilder collects a structure; path holds the key parts of the node
// being walked.
type structBuilder struct {
	s      codec.Structure
	path   []string
	parts  []string
	shapes []int
}

func (b *structBuilder) walk(td *TensorDict, depth int) {
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			j := len(b.parts)
			b.parts = append(append(b.parts, b.path[:depth]...), e.name)
			k := len(b.shapes)
			for d := range e.t.Dim() {
				b.shapes = append(b.shapes, e.t.Size(d))
			}
			b.s.Leaves = append(b.s.Leaves, codec.StructLeaf{
				Key:   codec.Key(b.parts[j:len(b.parts):len(b.parts)]),
				DType: e.t.DType(),
				Shape: b.shapes[k:len(b.shapes):len(b.shapes)],
			})
		case kindTD:
			b.path = append(b.path[:depth], e.name)
			b.walk(e.td, depth+1)
		}
	}
}

// signature is structureOf(td).Hash(codec.StorageOrder) without building
// the structure.
func signature(td *TensorDict) uint64 {
	h := codec.NewHasher(codec.StorageOrder, td.batch, countLeaves(td))
	var path [16]string
	hashLeaves(&h, td, path[:0])
	return h.Sum64()
}

func countLeaves(td *TensorDict) int {
	n := 0
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTensor:
			n++
		case kindTD:
			n += countLeaves(e.td)
		}
	}
	return n
}

// hashLeaves feeds the leaves of td, whose key is path, to h in storage
// order.
func hashLeaves(h *codec.Hasher, td *TensorDict, path []string) {
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			h.TensorLeaf(path, e.name, e.t)
		case kindTD:
			hashLeaves(h, e.td, append(path, e.name))
		}
	}
}

// Signature returns a 64-bit FNV-1a hash of td's structure: its batch size
// and, in storage order (depth first, insertion order), every tensor leaf's
// key, dtype and shape. Two TensorDicts whose consolidated storages can be
// exchanged byte for byte have equal signatures; StructureHash of td's
// consolidated metadata gives the same value. Non-tensor values are not part
// of it. Use DiffStructure to find where two structures differ. A nil
// *TensorDict has signature 0.
func (td *TensorDict) Signature() uint64 {
	if td == nil {
		return 0
	}
	return signature(td)
}

// StructureHash returns the Signature of the TensorDict that the consolidated
// metadata meta describes, without building it.
func StructureHash(meta []byte) (uint64, error) {
	h, err := codec.MetaHash(meta)
	if err != nil {
		return 0, fmt.Errorf("tensordict: StructureHash: %w", err)
	}
	return h, nil
}

// DiffStructure returns nil if a and b have the same structure (see
// Signature), and otherwise an error naming the first difference: the batch
// sizes, or the first leaf, in storage order, whose key, dtype or shape
// differs.
func DiffStructure(a, b *TensorDict) error {
	if a == nil || b == nil {
		return nilError("DiffStructure")
	}
	if err := codec.Diff(structureOf(a), structureOf(b)); err != nil {
		return fmt.Errorf("tensordict: DiffStructure: %w", err)
	}
	return nil
}

// DiffStructureMeta is DiffStructure between td and the TensorDict that the
// consolidated metadata meta describes (for example one a peer sent).
func DiffStructureMeta(td *TensorDict, meta []byte) error {
	if td == nil {
		return nilError("DiffStructureMeta")
	}
	s, err := codec.MetaStructure(meta)
	if err != nil {
		return fmt.Errorf("tensordict: DiffStructureMeta: %w", err)
	}
	if err := codec.Diff(structureOf(td), s); err != nil {
		return fmt.Errorf("tensordict: DiffStructureMeta: %w", err)
	}
	return nil
}
