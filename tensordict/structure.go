package tensordict

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/tdmpi/tdmpi/tensor"
)

// structLeaf is one tensor leaf of a structure: what a receiver must agree on
// with a sender before it reuses a buffer.
type structLeaf struct {
	key   Key
	dt    tensor.DType
	shape []int
}

// structure is a TensorDict's batch size and tensor leaves in storage order.
type structure struct {
	batch  []int
	leaves []structLeaf
}

func structureOf(td *TensorDict) structure {
	s := structure{batch: td.batch}
	td.walkLeaves(nil, func(k Key, n *TensorDict, j int) error {
		t := n.entries[j].t
		s.leaves = append(s.leaves, structLeaf{key: k, dt: t.DType(), shape: t.Shape()})
		return nil
	})
	return s
}

func structureOfMeta(meta []byte) (structure, error) {
	root, _, err := decodeMetadata(meta, math.MaxInt, newReadConfig(nil))
	if err != nil {
		return structure{}, err
	}
	type placed struct {
		structLeaf
		start int
	}
	var all []placed
	var walk func(n *metaNode)
	walk = func(n *metaNode) {
		for _, l := range n.leaves {
			all = append(all, placed{structLeaf{key: n.path.child(l.name), dt: l.dt, shape: l.shape}, l.start})
		}
		for _, c := range n.children {
			walk(c.node)
		}
	}
	walk(root)
	slices.SortStableFunc(all, func(a, b placed) int { return cmp.Compare(a.start, b.start) })
	s := structure{batch: root.batch, leaves: make([]structLeaf, len(all))}
	for i, p := range all {
		s.leaves[i] = p.structLeaf
	}
	return s, nil
}

func (s structure) hash() uint64 {
	h := fnv.New64a()
	var b [8]byte
	num := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	str := func(v string) {
		num(len(v))
		h.Write([]byte(v))
	}
	num(len(s.batch))
	for _, d := range s.batch {
		num(d)
	}
	num(len(s.leaves))
	for _, l := range s.leaves {
		num(len(l.key))
		for _, p := range l.key {
			str(p)
		}
		str(l.dt.TorchName())
		num(len(l.shape))
		for _, d := range l.shape {
			num(d)
		}
	}
	return h.Sum64()
}

// Signature returns a 64-bit FNV-1a hash of td's structure: its batch size
// and, in storage order (depth first, insertion order), every tensor leaf's
// key, dtype and shape. Two TensorDicts whose consolidated storages can be
// exchanged byte for byte have equal signatures; StructureHash of td's
// consolidated metadata gives the same value. Non-tensor values are not part
// of it. Use DiffStructure to find where two structures differ.
func (td *TensorDict) Signature() uint64 { return structureOf(td).hash() }

// StructureHash returns the Signature of the TensorDict that the consolidated
// metadata meta describes, without building it.
func StructureHash(meta []byte) (uint64, error) {
	s, err := structureOfMeta(meta)
	if err != nil {
		return 0, fmt.Errorf("tensordict: StructureHash: %w", err)
	}
	return s.hash(), nil
}

// DiffStructure returns nil if a and b have the same structure (see
// Signature), and otherwise an error naming the first difference: the batch
// sizes, or the first leaf, in storage order, whose key, dtype or shape
// differs.
func DiffStructure(a, b *TensorDict) error {
	if err := diff(structureOf(a), structureOf(b)); err != nil {
		return fmt.Errorf("tensordict: DiffStructure: %w", err)
	}
	return nil
}

// DiffStructureMeta is DiffStructure between td and the TensorDict that the
// consolidated metadata meta describes (for example one a peer sent).
func DiffStructureMeta(td *TensorDict, meta []byte) error {
	s, err := structureOfMeta(meta)
	if err != nil {
		return fmt.Errorf("tensordict: DiffStructureMeta: %w", err)
	}
	if err := diff(structureOf(td), s); err != nil {
		return fmt.Errorf("tensordict: DiffStructureMeta: %w", err)
	}
	return nil
}

func diff(a, b structure) error {
	if !equalInts(a.batch, b.batch) {
		return fmt.Errorf("batch size %v vs %v", a.batch, b.batch)
	}
	for i := 0; i < len(a.leaves) || i < len(b.leaves); i++ {
		switch {
		case i >= len(a.leaves):
			return fmt.Errorf("leaf %d: key %v only in the second", i, b.leaves[i].key)
		case i >= len(b.leaves):
			return fmt.Errorf("leaf %d: key %v only in the first", i, a.leaves[i].key)
		}
		x, y := a.leaves[i], b.leaves[i]
		switch {
		case !x.key.Equal(y.key):
			return fmt.Errorf("leaf %d: key %v vs %v", i, x.key, y.key)
		case x.dt != y.dt || !equalInts(x.shape, y.shape):
			return fmt.Errorf("key %v: %v%v vs %v%v", x.key, x.dt, x.shape, y.dt, y.shape)
		}
	}
	return nil
}
