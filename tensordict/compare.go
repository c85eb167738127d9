package tensordict

import (
	"fmt"
	"slices"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// boolFull returns a read-only bool tensor of the given shape filled with v:
// one element expanded with stride 0, so that a large batch size (which may
// come from a file) costs no memory.
func boolFull(v bool, shape []int) *tensor.Tensor {
	f := 0.0
	if v {
		f = 1
	}
	t, err := tensor.Full(tensor.Bool, f).Expand(shape...)
	if err != nil { // batch sizes are never negative
		panic("tensordict: " + err.Error())
	}
	return t
}

// compareValues returns, for each batch element, whether non-tensor values
// a and b (either a stack) are equal (eq) or differ (!eq) there.
func compareValues(a, b any, batch []int, eq bool) *tensor.Tensor {
	sa, aok := a.(*NonTensorStack)
	sb, bok := b.(*NonTensorStack)
	if (!aok || !equalInts(sa.shape, batch)) && (!bok || !equalInts(sb.shape, batch)) {
		return boolFull(equalValues(a, b) == eq, batch)
	}
	va, _ := elementValues(a, batch) // a stack's elements bound the batch
	vb, _ := elementValues(b, batch)
	out := make([]bool, len(va))
	for i := range out {
		out[i] = equalValues(va[i], vb[i]) == eq
	}
	t, err := tensor.FromSlice(out, batch...)
	if err != nil { // len(out) is the product of batch
		panic("tensordict: " + err.Error())
	}
	return t
}

// Eq compares td and o entry by entry, like Python tensordict's td == other:
// both must have the same keys at every level (in any order), and the result
// has td's structure with a bool tensor per leaf (tensor.Eq, which
// broadcasts and promotes dtypes). A non-tensor entry gives a bool tensor of
// the batch size, true where the values are equal (everywhere or nowhere
// unless one is a NonTensorStack).
func (td *TensorDict) Eq(o *TensorDict) (*TensorDict, error) {
	return guarded("Eq", func() (*TensorDict, error) { return td.compare("Eq", nil, o, (*tensor.Tensor).Eq, true) })
}

// Ne is the element-wise negation of Eq.
func (td *TensorDict) Ne(o *TensorDict) (*TensorDict, error) {
	return guarded("Ne", func() (*TensorDict, error) { return td.compare("Ne", nil, o, (*tensor.Tensor).Ne, false) })
}

func (td *TensorDict) compare(op string, prefix Key, o *TensorDict, fn func(a, b *tensor.Tensor) (*tensor.Tensor, error), eq bool) (*TensorDict, error) {
	if o == nil {
		return nil, fmt.Errorf("tensordict: %s: nil tensordict", op)
	}
	if len(td.entries) != len(o.entries) {
		return nil, fmt.Errorf("tensordict: %s: at %v: key sets differ: %v vs %v", op, keyOrRoot(prefix), td.names(), o.names())
	}
	out := newTD(td.batch)
	out.class = td.class
	for i := range td.entries {
		e := &td.entries[i]
		k := prefix.child(e.name)
		j, ok := o.lookup(e.name)
		if !ok {
			return nil, fmt.Errorf("tensordict: %s: key %v missing from the other tensordict (keys %v vs %v)", op, k, td.names(), o.names())
		}
		f := &o.entries[j]
		if e.kind != f.kind {
			return nil, fmt.Errorf("tensordict: %s: key %v is a %v here and a %v in the other tensordict", op, k, e.kind, f.kind)
		}
		switch e.kind {
		case kindTensor:
			r, err := fn(e.t, f.t)
			if err != nil {
				return nil, fmt.Errorf("tensordict: %s: key %v: %w", op, k, err)
			}
			out.add(e.name, entry{kind: kindTensor, t: r})
		case kindTD:
			sub, err := e.td.compare(op, k, f.td, fn, eq)
			if err != nil {
				return nil, err
			}
			out.add(e.name, entry{kind: kindTD, td: sub})
		case kindNonTensor:
			out.add(e.name, entry{kind: kindTensor, t: compareValues(e.v, f.v, td.batch, eq)})
		}
	}
	return out, nil
}

// names returns the entry names of td, sorted, for messages.
func (td *TensorDict) names() []string {
	out := make([]string, len(td.entries))
	for i := range td.entries {
		out[i] = td.entries[i].name
	}
	slices.Sort(out)
	return out
}

// keyOrRoot prints k, or "root" for the empty key.
func keyOrRoot(k Key) string {
	if len(k) == 0 {
		return "root"
	}
	return k.String()
}

// EqScalar compares every leaf with v element-wise (like td == v in Python)
// and returns a TensorDict of bool tensors with td's structure. A non-tensor
// entry gives a bool tensor of the batch size, true when the value is the
// number v.
func (td *TensorDict) EqScalar(v float64) (out *TensorDict) {
	faultPanics("EqScalar", func() { out = td.scalarCompare("EqScalar", nil, v, (*tensor.Tensor).EqScalar, true) })
	return out
}

// NeScalar is the element-wise negation of EqScalar.
func (td *TensorDict) NeScalar(v float64) (out *TensorDict) {
	faultPanics("NeScalar", func() { out = td.scalarCompare("NeScalar", nil, v, (*tensor.Tensor).NeScalar, false) })
	return out
}

// scalarCompare is EqScalar (eq) or NeScalar, op, of td, whose key is
// prefix.
func (td *TensorDict) scalarCompare(op string, prefix Key, v float64, fn func(*tensor.Tensor, float64) *tensor.Tensor, eq bool) *TensorDict {
	out := newTD(td.batch)
	out.class = td.class
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			out.add(e.name, entry{kind: kindTensor, t: namedNoMemory(op, prefix, e.name, func() *tensor.Tensor { return fn(e.t, v) })})
		case kindTD:
			out.add(e.name, entry{kind: kindTD, td: e.td.scalarCompare(op, prefix.child(e.name), v, fn, eq)})
		case kindNonTensor:
			out.add(e.name, entry{kind: kindTensor, t: compareValues(e.v, v, td.batch, eq)})
		}
	}
	return out
}

// namedNoMemory returns f(), the result of op for the entry name of the
// TensorDict whose key is prefix: a result too large for memory, which f
// panics with (see catchNoMemory), panics again with an error naming op
// and the entry's key, as Contiguous's does.
func namedNoMemory(op string, prefix Key, name string, f func() *tensor.Tensor) (t *tensor.Tensor) {
	var err error
	func() {
		defer catchNoMemory(&err, "", nil)
		t = f()
	}()
	if err != nil {
		panic(fmt.Errorf("tensordict: %s: key %v: %w", op, prefix.child(name), err))
	}
	return t
}

// All reports whether every element of every tensor leaf, at every level, is
// non-zero (true for a TensorDict without leaves), like Python's
// bool(td.all()). Non-tensor values are not considered. A fault reading
// a mapped leaf panics as EqScalar's does.
func (td *TensorDict) All() bool {
	var err error
	faultPanics("All", func() {
		err = td.walkLeaves(nil, func(_ Key, n *TensorDict, j int) error {
			if !distinct(n.entries[j].t).All() {
				return errStop
			}
			return nil
		})
	})
	return err == nil
}

// Any reports whether some element of some tensor leaf is non-zero.
func (td *TensorDict) Any() bool {
	var err error
	faultPanics("Any", func() {
		err = td.walkLeaves(nil, func(_ Key, n *TensorDict, j int) error {
			if distinct(n.entries[j].t).Any() {
				return errStop
			}
			return nil
		})
	})
	return err != nil
}

// distinct returns a view of t without its repeated elements: each dimension
// of stride 0 (from Expand) narrowed to length 1. All and Any of it equal
// those of t, at the cost of the distinct elements only.
func distinct(t *tensor.Tensor) *tensor.Tensor {
	strides := t.Strides()
	for d, s := range strides {
		if s == 0 && t.Size(d) > 1 {
			if n, err := t.Narrow(d, 0, 1); err == nil {
				t = n
			}
		}
	}
	return t
}

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
