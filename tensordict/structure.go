package tensordict

import (
	"fmt"
	"math"

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

// structureOf returns td's structure. The keys share one backing array,
// and so do the shapes.
func structureOf(td *TensorDict) structure {
	b := structBuilder{s: structure{batch: td.batch}}
	b.walk(td, 0)
	return b.s
}

// structBuilder collects a structure; path holds the key parts of the node
// being walked.
type structBuilder struct {
	s      structure
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
			b.s.leaves = append(b.s.leaves, structLeaf{
				key:   Key(b.parts[j:len(b.parts):len(b.parts)]),
				dt:    e.t.DType(),
				shape: b.shapes[k:len(b.shapes):len(b.shapes)],
			})
		case kindTD:
			b.path = append(b.path[:depth], e.name)
			b.walk(e.td, depth+1)
		}
	}
}

func structureOfMeta(meta []byte) (structure, error) {
	d := new(metaDecoder)
	if len(meta) > defaultMaxMetadataBytes {
		return structure{}, fmt.Errorf("metadata is %d bytes, limit %d", len(meta), defaultMaxMetadataBytes)
	}
	d.init(meta, math.MaxInt, newReadConfig(nil))
	root, _, err := d.decode()
	if err != nil {
		return structure{}, err
	}
	n, err := keyParts(d.sorted)
	if err != nil {
		return structure{}, err
	}
	s := structure{batch: root.batch, leaves: make([]structLeaf, len(d.sorted))}
	parts := make([]string, 0, n)
	for i, l := range d.sorted {
		j := len(parts)
		parts = append(l.node.appendPath(parts), l.name)
		s.leaves[i] = structLeaf{key: Key(parts[j:len(parts):len(parts)]), dt: l.dt, shape: l.shape}
	}
	return s, nil
}

// hashMeta is structureOfMeta(meta).hash() without building the structure.
func hashMeta(meta []byte) (uint64, error) {
	if len(meta) > defaultMaxMetadataBytes {
		return 0, fmt.Errorf("metadata is %d bytes, limit %d", len(meta), defaultMaxMetadataBytes)
	}
	d := decoderPool.Get().(*metaDecoder)
	defer func() {
		*d = metaDecoder{}
		decoderPool.Put(d)
	}()
	d.init(meta, math.MaxInt, newReadConfig(nil))
	root, _, err := d.decode()
	if err != nil {
		return 0, err
	}
	if _, err := keyParts(d.sorted); err != nil {
		return 0, err
	}
	h := newFNV()
	h.num(len(root.batch))
	for _, v := range root.batch {
		h.num(v)
	}
	h.num(len(d.sorted))
	for _, l := range d.sorted {
		h.num(l.node.level + 1)
		h.path(l.node)
		h.lenStr(l.name)
		h.dtype(l.dt)
		h.num(len(l.shape))
		for _, v := range l.shape {
			h.num(v)
		}
	}
	return uint64(h), nil
}

// maxKeyParts bounds the key parts, summed over the leaves, of the
// structure of metadata from outside: a million leaves a thousand levels
// deep, say, would otherwise cost a billion parts (16 GB of keys).
const maxKeyParts = 1 << 24

// keyParts returns the key parts of leaves, summed, or an error if they are
// more than maxKeyParts.
func keyParts(leaves []*leafMeta) (int, error) {
	n := 0
	for _, l := range leaves {
		if n += l.node.level + 1; n > maxKeyParts {
			return 0, fmt.Errorf("leaf keys have more than %d parts in all: %w", maxKeyParts, ErrLimit)
		}
	}
	return n, nil
}

// path hashes the parts of n's key, as lenStr would each.
func (h *fnvHash) path(n *metaNode) {
	if n.parent == nil {
		return
	}
	h.path(n.parent)
	h.lenStr(n.name)
}

// appendPath appends the parts of n's key to dst.
func (n *metaNode) appendPath(dst []string) []string {
	if n.parent == nil {
		return dst
	}
	return append(n.parent.appendPath(dst), n.name)
}

// fnvHash is a 64-bit FNV-1a hash that does not allocate.
type fnvHash uint64

func newFNV() fnvHash { return 14695981039346656037 }

func (h *fnvHash) str(s string) {
	for i := 0; i < len(s); i++ {
		*h = (*h ^ fnvHash(s[i])) * 1099511628211
	}
}

// num hashes v as 8 little-endian bytes.
func (h *fnvHash) num(v int) {
	u := uint64(v)
	for range 8 {
		*h = (*h ^ fnvHash(u&0xff)) * 1099511628211
		u >>= 8
	}
}

// lenStr hashes the length of s, then s.
func (h *fnvHash) lenStr(s string) {
	h.num(len(s))
	h.str(s)
}

// dtype hashes d's torch name as lenStr would.
func (h *fnvHash) dtype(d tensor.DType) {
	name := d.String()
	h.num(len("torch.") + len(name))
	h.str("torch.")
	h.str(name)
}

func (s structure) hash() uint64 {
	h := newFNV()
	h.num(len(s.batch))
	for _, d := range s.batch {
		h.num(d)
	}
	h.num(len(s.leaves))
	for _, l := range s.leaves {
		h.num(len(l.key))
		for _, p := range l.key {
			h.lenStr(p)
		}
		h.dtype(l.dt)
		h.num(len(l.shape))
		for _, d := range l.shape {
			h.num(d)
		}
	}
	return uint64(h)
}

// signature is structureOf(td).hash() without building the structure.
func signature(td *TensorDict) uint64 {
	h := newFNV()
	h.num(len(td.batch))
	for _, d := range td.batch {
		h.num(d)
	}
	h.num(countLeaves(td))
	var path [16]string
	hashLeaves(&h, td, path[:0])
	return uint64(h)
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

// hashLeaves hashes the leaves of td, whose key is path, as hash does.
func hashLeaves(h *fnvHash, td *TensorDict, path []string) {
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			h.num(len(path) + 1)
			for _, p := range path {
				h.lenStr(p)
			}
			h.lenStr(e.name)
			h.dtype(e.t.DType())
			h.num(e.t.Dim())
			for d := range e.t.Dim() {
				h.num(e.t.Size(d))
			}
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
	h, err := hashMeta(meta)
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
	if err := diff(structureOf(a), structureOf(b)); err != nil {
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
