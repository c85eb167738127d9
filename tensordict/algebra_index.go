package tensordict

import (
	"fmt"
	"slices"

	"github.com/tdmpi/tdmpi/tensor"
)

// Index selects entries of the first batch dimension for SetAt: one
// position (IndexAt), a range (IndexRange), a list of positions
// (IndexList) or a mask over leading batch dimensions (IndexMask). It is
// what Python writes between brackets in td[index] = other.
type Index struct {
	kind              indexKind
	i                 int
	start, stop, step int
	list              []int
	mask              *tensor.Tensor
}

type indexKind uint8

const (
	indexAt indexKind = iota + 1
	indexRange
	indexList
	indexMask
)

// IndexAt selects position i of the first batch dimension (td[i]);
// negative i counts from the end.
func IndexAt(i int) Index { return Index{kind: indexAt, i: i} }

// IndexRange selects td[start:stop:step] of the first batch dimension,
// with Python's slice rules (see Slice; use math.MaxInt as stop for "to the
// end").
func IndexRange(start, stop, step int) Index {
	return Index{kind: indexRange, start: start, stop: stop, step: step}
}

// IndexList selects the positions idx of the first batch dimension, in
// that order (td[[i, j, ...]]).
func IndexList(idx ...int) Index { return Index{kind: indexList, list: slices.Clone(idx)} }

// IndexMask selects the entries where mask, a bool tensor of the leading
// batch shape, is true (td[mask]).
func IndexMask(mask *tensor.Tensor) Index { return Index{kind: indexMask, mask: mask} }

// String describes the index for messages.
func (ix Index) String() string {
	switch ix.kind {
	case indexAt:
		return fmt.Sprintf("[%d]", ix.i)
	case indexRange:
		return fmt.Sprintf("[%d:%d:%d]", ix.start, ix.stop, ix.step)
	case indexList:
		return fmt.Sprintf("%v", ix.list)
	case indexMask:
		if ix.mask == nil {
			return "[nil mask]"
		}
		return fmt.Sprintf("[mask %v%v]", ix.mask.DType(), ix.mask.Shape())
	}
	return "[invalid index]"
}

// selectIndex returns td[ix]: views for IndexAt and IndexRange, copies for
// the others (the batch size of the part SetAt writes).
func (td *TensorDict) selectIndex(ix Index) (*TensorDict, error) {
	switch ix.kind {
	case indexAt:
		return td.Index(ix.i)
	case indexRange:
		return td.Slice(0, ix.start, ix.stop, ix.step)
	case indexList:
		return td.IndexSelect(ix.list)
	case indexMask:
		return td.Mask(ix.mask)
	}
	return nil, fmt.Errorf("tensordict: invalid index (use IndexAt, IndexRange, IndexList or IndexMask)")
}

// write writes src into t at ix, in place.
func (ix Index) write(t, src *tensor.Tensor) error {
	switch ix.kind {
	case indexAt:
		v, err := t.Select(0, ix.i)
		if err != nil {
			return err
		}
		return v.CopyFrom(src)
	case indexRange:
		v, err := t.Slice(0, ix.start, ix.stop, ix.step)
		if err != nil {
			return err
		}
		return v.CopyFrom(src)
	case indexList:
		return t.IndexPut(0, ix.list, src)
	default:
		return t.MaskPut(ix.mask, src)
	}
}

// checkIndex validates ix against td's batch size without copying.
func (td *TensorDict) checkIndex(op string, ix Index) error {
	if len(td.batch) == 0 {
		return fmt.Errorf("tensordict: %s: tensordict has no batch dimension to index", op)
	}
	n := td.batch[0]
	switch ix.kind {
	case indexAt:
		if ix.i < -n || ix.i >= n {
			return fmt.Errorf("tensordict: %s: index %d out of range for batch size %v", op, ix.i, td.batch)
		}
	case indexRange:
		if ix.step <= 0 {
			return fmt.Errorf("tensordict: %s: step %d must be positive", op, ix.step)
		}
	case indexList:
		for k, i := range ix.list {
			if i < -n || i >= n {
				return fmt.Errorf("tensordict: %s: index %d (position %d) out of range for batch size %v", op, i, k, td.batch)
			}
		}
	case indexMask:
		if ix.mask == nil {
			return fmt.Errorf("tensordict: %s: nil mask", op)
		}
		if ms := ix.mask.Shape(); ix.mask.DType() != tensor.Bool || len(ms) == 0 || !hasPrefix(td.batch, ms) {
			return fmt.Errorf("tensordict: %s: mask %v%v does not match the leading dimensions of batch size %v", op, ix.mask.DType(), ms, td.batch)
		}
	default:
		return fmt.Errorf("tensordict: %s: invalid index (use IndexAt, IndexRange, IndexList or IndexMask)", op)
	}
	return nil
}

// SetAt writes src into td at ix, in place: Python's td[index] = src. Every
// tensor leaf of src is written into td's leaf of the same key (which must
// exist) at ix, broadcasting and converting as CopyFrom does; td's leaves
// keep their storage, so a write into a memory-mapped TensorDict (from
// LoadMemmap) reaches its files. src's batch size is td's batch size
// indexed by ix, or broadcasts to it. Non-tensor values of src are not
// written. The index and the keys are checked before anything is written.
func (td *TensorDict) SetAt(ix Index, src *TensorDict) error {
	if src == nil {
		return fmt.Errorf("tensordict: SetAt: nil tensordict")
	}
	if err := td.checkIndex("SetAt", ix); err != nil {
		return err
	}
	var dsts []*tensor.Tensor
	var srcs []*tensor.Tensor
	var keys []Key
	err := src.walkLeaves(nil, func(k Key, n *TensorDict, j int) error {
		dst, err := td.Get(k)
		if err != nil {
			return fmt.Errorf("tensordict: SetAt: %w", err)
		}
		dsts, srcs, keys = append(dsts, dst), append(srcs, n.entries[j].t), append(keys, k)
		return nil
	})
	if err != nil {
		return err
	}
	for i, dst := range dsts {
		if err := guardFault("SetAt", func() error { return ix.write(dst, srcs[i]) }); err != nil {
			return fmt.Errorf("tensordict: SetAt: key %v at %v: %w", keys[i], ix, err)
		}
	}
	return nil
}

// SetAtKey writes v into the existing tensor leaf k at ix, in place:
// Python's set_at_(key, value, index).
func (td *TensorDict) SetAtKey(k Key, v *tensor.Tensor, ix Index) error {
	if v == nil {
		return fmt.Errorf("tensordict: SetAtKey: key %v: nil tensor", k)
	}
	if err := td.checkIndex("SetAtKey", ix); err != nil {
		return err
	}
	dst, err := td.Get(k)
	if err != nil {
		return err
	}
	if err := guardFault("SetAtKey", func() error { return ix.write(dst, v) }); err != nil {
		return fmt.Errorf("tensordict: SetAtKey: key %v at %v: %w", k, ix, err)
	}
	return nil
}

// GetAt returns td[ix]: views for IndexAt and IndexRange, copies for
// IndexList and IndexMask (as torch's indexing does).
func (td *TensorDict) GetAt(ix Index) (*TensorDict, error) {
	if err := td.checkIndex("GetAt", ix); err != nil {
		return nil, err
	}
	return td.selectIndex(ix)
}

// ApplyInPlace replaces every tensor leaf's values by fn's result for it,
// in place (Python's apply_): the result is copied into the leaf, which
// keeps its storage, so it must broadcast to the leaf's shape and is
// converted to its dtype. fn returning nil leaves the leaf unchanged.
func (td *TensorDict) ApplyInPlace(fn func(Key, *tensor.Tensor) (*tensor.Tensor, error)) error {
	return td.guardedWalk("ApplyInPlace", func(k Key, n *TensorDict, j int) error {
		t := n.entries[j].t
		r, err := fn(k, t)
		if err != nil {
			return err
		}
		if r == nil {
			return nil
		}
		if err := t.CopyFrom(r); err != nil {
			return fmt.Errorf("tensordict: ApplyInPlace: key %v: %w", k, err)
		}
		return nil
	})
}

// ApplyOption changes what ApplyWith does.
type ApplyOption func(*applyConfig)

type applyConfig struct {
	batch   []int
	inPlace bool
}

// ApplyBatchSize gives ApplyWith's result the batch size batch (Python's
// apply(..., batch_size=...)): nested TensorDicts get it in place of td's
// batch dimensions, followed by their own extra ones, and fn's results
// must fit it.
func ApplyBatchSize(batch ...int) ApplyOption {
	b := slices.Clone(batch)
	if b == nil {
		b = []int{}
	}
	return func(c *applyConfig) { c.batch = b }
}

// ApplyInto makes ApplyWith write fn's results into td's leaves, in place
// (Python's apply(..., inplace=True)), and return td.
func ApplyInto() ApplyOption { return func(c *applyConfig) { c.inPlace = true } }

// ApplyWith calls fn for every tensor leaf of td with that leaf followed by
// the leaves of the same key in others (Python's apply(fn, *others)), which
// must have td's structure; an error names the first key that differs.
// The result has td's structure with fn's results as leaves (nil drops
// one); see ApplyBatchSize and ApplyInto.
func (td *TensorDict) ApplyWith(others []*TensorDict, fn func(Key, []*tensor.Tensor) (*tensor.Tensor, error), opts ...ApplyOption) (*TensorDict, error) {
	var c applyConfig
	for _, o := range opts {
		o(&c)
	}
	if c.inPlace && c.batch != nil {
		return nil, fmt.Errorf("tensordict: ApplyWith: a new batch size cannot be applied in place")
	}
	for i, d := range c.batch {
		if d < 0 {
			return nil, fmt.Errorf("tensordict: ApplyWith: batch size %v: dimension %d is negative", c.batch, i)
		}
	}
	bd := len(td.batch)
	spec := &zipSpec{
		op:        "ApplyWith",
		nonTensor: firstValue,
		batch: func(batches [][]int) ([]int, error) {
			if _, err := sameBatches(batches); err != nil {
				return nil, err
			}
			if c.batch == nil {
				return batches[0], nil
			}
			return withLead(c.batch, bd, batches[0]), nil
		},
		leaf: func(k Key, ts []*tensor.Tensor) (*tensor.Tensor, error) {
			r, err := fn(k, ts)
			if err != nil || r == nil || !c.inPlace {
				return r, err
			}
			return ts[0], ts[0].CopyFrom(r)
		},
	}
	all := append([]*TensorDict{td}, others...)
	if c.inPlace {
		// Check the structure before writing anything.
		check := *spec
		check.leaf = func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return ts[0], nil }
		if _, err := zip(&check, all); err != nil {
			return nil, err
		}
		if _, err := zip(spec, all); err != nil {
			return nil, err
		}
		return td, nil
	}
	return zip(spec, all)
}

// FromMap builds a TensorDict of batch size batch from a nested map: a
// *tensor.Tensor value is a leaf, a map[string]any or *TensorDict a nested
// TensorDict (a map takes the batch size of its parent), and anything else
// a non-tensor value (see SetNonTensor). Keys are added in sorted order,
// since a Go map has none.
func FromMap(m map[string]any, batch ...int) (*TensorDict, error) {
	for i, d := range batch {
		if d < 0 {
			return nil, fmt.Errorf("tensordict: FromMap: batch size %v: dimension %d is negative", batch, i)
		}
	}
	td := newTD(batch)
	if err := td.fromMap(nil, m, 0); err != nil {
		return nil, err
	}
	return td, nil
}

// maxMapDepth bounds the nesting of FromMap, against a map that contains
// itself.
const maxMapDepth = 256

func (td *TensorDict) fromMap(prefix Key, m map[string]any, depth int) error {
	if depth > maxMapDepth {
		return fmt.Errorf("tensordict: FromMap: key %v: nesting deeper than %d levels", prefix, maxMapDepth)
	}
	for _, name := range sortedKeys(m) {
		k := prefix.child(name)
		var err error
		switch v := m[name].(type) {
		case *tensor.Tensor:
			err = td.Set(Key{name}, v)
		case *TensorDict:
			err = td.SetTD(Key{name}, v)
		case map[string]any:
			sub := newTD(td.batch)
			if err = sub.fromMap(k, v, depth+1); err == nil {
				err = td.SetTD(Key{name}, sub)
			}
		default:
			err = td.SetNonTensor(Key{name}, v)
		}
		if err != nil {
			return fmt.Errorf("tensordict: FromMap: key %v: %w", k, err)
		}
	}
	return nil
}

// ToMap returns td as a nested map: tensor leaves as *tensor.Tensor (shared,
// not copied), nested TensorDicts as map[string]any, non-tensor values as
// copies. The batch sizes are not part of the map.
func (td *TensorDict) ToMap() map[string]any {
	out := make(map[string]any, len(td.entries))
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			out[e.name] = e.t
		case kindTD:
			out[e.name] = e.td.ToMap()
		case kindNonTensor:
			out[e.name] = cloneValue(e.v)
		}
	}
	return out
}

// UpdateOption changes what Update does.
type UpdateOption func(*updateConfig)

type updateConfig struct {
	inPlace bool
	clone   bool
	keys    *keyTree // nil: every key
	strict  bool     // every leaf must exist (UpdateInPlace, Python's update_)
}

// WriteInPlace makes Update copy o's leaves into td's existing
// leaves of the same keys, which keep their storage (Python's
// update(inplace=True)): a memory-mapped td writes through to its files.
// Keys td lacks are added as Update adds them.
func WriteInPlace() UpdateOption { return func(c *updateConfig) { c.inPlace = true } }

// UpdateKeys limits Update to the given keys of o (Python's
// keys_to_update); a nested key selects inside nested TensorDicts, a key of
// a nested TensorDict selects all of it.
func UpdateKeys(keys ...Key) UpdateOption {
	kt := buildKeyTree(keys)
	return func(c *updateConfig) { c.keys = kt }
}

// UpdateClone makes Update store copies of o's leaves instead of sharing
// them (Python's clone=True).
func UpdateClone() UpdateOption { return func(c *updateConfig) { c.clone = true } }

func updateOptions(opts []UpdateOption) *updateConfig {
	c := &updateConfig{}
	for _, o := range opts {
		o(c)
	}
	return c
}

// selected reports whether the entry k of the other TensorDict is to be
// merged: it is named by a key, lies below one, or has one below it.
func (c *updateConfig) selected(k Key) bool {
	if c.keys == nil {
		return true
	}
	n := c.keys
	for _, p := range k {
		if n.whole {
			return true
		}
		if n = n.sub[p]; n == nil {
			return false
		}
	}
	return true
}

// updateLeaf merges the leaf v of the other TensorDict as key k.
func (td *TensorDict) updateLeaf(k Key, v *tensor.Tensor, c *updateConfig) (err error) {
	defer catchNoMemory(&err, "Update", k)
	if c.inPlace || c.strict {
		dst, err := td.Get(k)
		switch {
		case err == nil:
			if err := dst.CopyFrom(v); err != nil {
				return fmt.Errorf("tensordict: Update: key %v: %w", k, err)
			}
			return nil
		case c.strict:
			return fmt.Errorf("tensordict: UpdateInPlace: %w", err)
		}
	}
	if c.clone {
		v = v.Clone()
	}
	return td.Set(k, v)
}

// UpdateInPlace copies o's leaves into td's leaves of the same keys, in
// place (Python's update_): every leaf of o (or of keys, when given) must
// exist in td; the leaves keep their storage, so a memory-mapped td writes
// through to its files. Non-tensor values are set.
func (td *TensorDict) UpdateInPlace(o *TensorDict, keys ...Key) error {
	if o == nil {
		return fmt.Errorf("tensordict: UpdateInPlace: nil tensordict")
	}
	c := &updateConfig{strict: true}
	if len(keys) > 0 {
		c.keys = buildKeyTree(keys)
	}
	return guardFault("UpdateInPlace", func() error { return td.update(nil, o, c) })
}
