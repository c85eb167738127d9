package codec

import (
	"fmt"
	"math"
	"slices"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// The structure hash. A structure is a batch size and a list of tensor
// leaves, each a key, a dtype and a shape: what two sides must agree on
// before one reinterprets the other's bytes. Its hash is a 64-bit FNV-1a
// of an unambiguous byte encoding (every item length-prefixed, integers as
// 8 little-endian bytes):
//
//	order, len(batch), batch..., len(leaves),
//	then per leaf: len(key), (len(part), part)..., len(dtype), "torch."+dtype, len(shape), shape...
//
// The order in which the leaves are listed is part of the hash and is
// named by an Order, so that a hash of one order never equals the hash of
// the other by accident.

// Order is the order in which a structure lists its leaves.
type Order uint8

const (
	// StorageOrder lists the leaves as the consolidated layout packs them:
	// depth first, in insertion order. Consolidated transfers depend on it.
	StorageOrder Order = 1
	// SortedOrder lists the leaves by key (CompareKeys), as tensordict's
	// sorted keys do, whatever order they were inserted in. Per-leaf
	// transfers and collectives match leaves in this order.
	SortedOrder Order = 2
)

// String returns "storage" or "sorted".
func (o Order) String() string {
	switch o {
	case StorageOrder:
		return "storage"
	case SortedOrder:
		return "sorted"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}

// FNV64a returns the 64-bit FNV-1a hash of b. It does not allocate.
func FNV64a(b []byte) uint64 {
	h := fnvOffset
	h.bytes(b)
	return uint64(h)
}

// fnv is a running 64-bit FNV-1a hash.
type fnv uint64

const (
	fnvOffset fnv = 14695981039346656037
	fnvPrime  fnv = 1099511628211
)

func (h *fnv) bytes(b []byte) {
	for _, c := range b {
		*h = (*h ^ fnv(c)) * fnvPrime
	}
}

func (h *fnv) str(s string) {
	for i := 0; i < len(s); i++ {
		*h = (*h ^ fnv(s[i])) * fnvPrime
	}
}

// num hashes v as 8 little-endian bytes.
func (h *fnv) num(v int) {
	u := uint64(v)
	for range 8 {
		*h = (*h ^ fnv(u&0xff)) * fnvPrime
		u >>= 8
	}
}

// lenStr hashes the length of s, then s.
func (h *fnv) lenStr(s string) {
	h.num(len(s))
	h.str(s)
}

// dtype hashes d's torch name ("torch.float32") as lenStr would.
func (h *fnv) dtype(d tensor.DType) {
	name := d.String()
	h.num(len("torch.") + len(name))
	h.str("torch.")
	h.str(name)
}

func (h *fnv) ints(s []int) {
	h.num(len(s))
	for _, v := range s {
		h.num(v)
	}
}

// Hasher computes a structure hash from leaves fed one by one, for callers
// that walk their own trees rather than build a Structure. It does not
// allocate.
type Hasher struct{ h fnv }

// NewHasher starts the hash of a structure with the batch size batch and n
// leaves, which the caller then feeds with Leaf in order o.
func NewHasher(o Order, batch []int, n int) Hasher {
	h := fnvOffset
	h.num(int(o))
	h.ints(batch)
	h.num(n)
	return Hasher{h}
}

// Leaf hashes the next leaf: its key is path followed by name.
func (h *Hasher) Leaf(path []string, name string, dt tensor.DType, shape []int) {
	h.h.num(len(path) + 1)
	for _, p := range path {
		h.h.lenStr(p)
	}
	h.h.lenStr(name)
	h.h.dtype(dt)
	h.h.ints(shape)
}

// TensorLeaf is Leaf with t's dtype and shape.
func (h *Hasher) TensorLeaf(path []string, name string, t *tensor.Tensor) {
	h.h.num(len(path) + 1)
	for _, p := range path {
		h.h.lenStr(p)
	}
	h.h.lenStr(name)
	h.h.dtype(t.DType())
	h.h.num(t.Dim())
	for d := range t.Dim() {
		h.h.num(t.Size(d))
	}
}

// Sum64 returns the hash.
func (h *Hasher) Sum64() uint64 { return uint64(h.h) }

// StructLeaf is one tensor leaf of a Structure.
type StructLeaf struct {
	Key   Key          `json:"k"`
	DType tensor.DType `json:"d"`
	Shape []int        `json:"s"`
}

// Structure is the neutral structure descriptor: a batch size and tensor
// leaves, in the order of whoever built it (StorageOrder unless said
// otherwise). Its JSON form (short member names, dtypes as numbers) is
// what collective ranks exchange to explain a mismatch.
type Structure struct {
	Batch  []int        `json:"b"`
	Leaves []StructLeaf `json:"l"`
}

// Hash returns the structure hash of s with its leaves in order o: s's own
// order for StorageOrder (s must list them so), sorted by key for
// SortedOrder.
func (s Structure) Hash(o Order) uint64 {
	leaves := s.Leaves
	if o == SortedOrder {
		leaves = s.Sorted().Leaves
	}
	h := NewHasher(o, s.Batch, len(leaves))
	for _, l := range leaves {
		if len(l.Key) == 0 {
			h.Leaf(nil, "", l.DType, l.Shape)
			continue
		}
		h.Leaf(l.Key[:len(l.Key)-1], l.Key[len(l.Key)-1], l.DType, l.Shape)
	}
	return h.Sum64()
}

// Sorted returns s with its leaves sorted by key (stable), in a new slice.
func (s Structure) Sorted() Structure {
	leaves := slices.Clone(s.Leaves)
	slices.SortStableFunc(leaves, func(a, b StructLeaf) int { return CompareKeys(a.Key, b.Key) })
	return Structure{Batch: s.Batch, Leaves: leaves}
}

// Diff returns nil if a and b are the same structure, and otherwise an
// error naming the first difference: the batch sizes, or the first leaf,
// in list order, whose key, dtype or shape differs.
func Diff(a, b Structure) error {
	if !slices.Equal(a.Batch, b.Batch) {
		return fmt.Errorf("batch size %v vs %v", a.Batch, b.Batch)
	}
	for i := 0; i < len(a.Leaves) || i < len(b.Leaves); i++ {
		switch {
		case i >= len(a.Leaves):
			return fmt.Errorf("leaf %d: key %v only in the second", i, b.Leaves[i].Key)
		case i >= len(b.Leaves):
			return fmt.Errorf("leaf %d: key %v only in the first", i, a.Leaves[i].Key)
		}
		x, y := a.Leaves[i], b.Leaves[i]
		switch {
		case !slices.Equal(x.Key, y.Key):
			return fmt.Errorf("leaf %d: key %v vs %v", i, x.Key, y.Key)
		case x.DType != y.DType || !slices.Equal(x.Shape, y.Shape):
			return fmt.Errorf("key %v: %v%v vs %v%v", x.Key, x.DType, x.Shape, y.DType, y.Shape)
		}
	}
	return nil
}

// MetaStructure returns the structure, in StorageOrder, of the TensorDict
// that the consolidated metadata meta describes, decoded within the
// default limits against a storage of any size. The keys share one backing
// array.
func MetaStructure(meta []byte) (Structure, error) {
	// Not a pooled decoder: the shapes and batch size stay in its arenas.
	d := new(Decoder)
	root, _, err := d.Decode(meta, math.MaxInt, DefaultLimits())
	if err != nil {
		return Structure{}, err
	}
	sorted := d.Sorted()
	n, err := keyParts(sorted)
	if err != nil {
		return Structure{}, err
	}
	s := Structure{Batch: root.Batch, Leaves: make([]StructLeaf, len(sorted))}
	parts := make([]string, 0, n)
	for i, l := range sorted {
		j := len(parts)
		parts = append(l.Node.appendPath(parts), l.Name)
		s.Leaves[i] = StructLeaf{Key: Key(parts[j:len(parts):len(parts)]), DType: l.DType, Shape: l.Shape}
	}
	return s, nil
}

// MetaHash is MetaStructure(meta).Hash(StorageOrder) without building the
// structure.
func MetaHash(meta []byte) (uint64, error) {
	d := NewDecoder()
	defer d.Release()
	root, _, err := d.Decode(meta, math.MaxInt, DefaultLimits())
	if err != nil {
		return 0, err
	}
	sorted := d.Sorted()
	if _, err := keyParts(sorted); err != nil {
		return 0, err
	}
	h := NewHasher(StorageOrder, root.Batch, len(sorted))
	for _, l := range sorted {
		h.h.num(l.Node.Level + 1)
		h.h.path(l.Node)
		h.h.lenStr(l.Name)
		h.h.dtype(l.DType)
		h.h.ints(l.Shape)
	}
	return h.Sum64(), nil
}

// keyParts returns the key parts of leaves, summed, or an error if they are
// more than MaxKeyParts.
func keyParts(leaves []*Leaf) (int, error) {
	n := 0
	for _, l := range leaves {
		if n += l.Node.Level + 1; n > MaxKeyParts {
			return 0, fmt.Errorf("leaf keys have more than %d parts in all: %w", MaxKeyParts, wire.ErrLimit)
		}
	}
	return n, nil
}

// path hashes the parts of n's key, as lenStr would each.
func (h *fnv) path(n *Node) {
	if n.Parent == nil {
		return
	}
	h.path(n.Parent)
	h.lenStr(n.Name)
}

// appendPath appends the parts of n's key to dst.
func (n *Node) appendPath(dst []string) []string {
	if n.Parent == nil {
		return dst
	}
	return append(n.Parent.appendPath(dst), n.Name)
}
