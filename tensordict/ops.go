package tensordict

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/tensor"
)

// leafFunc maps one tensor leaf for rebuild; returning nil drops the leaf.
type leafFunc func(k Key, t *tensor.Tensor) (*tensor.Tensor, error)

// rebuild returns a new TensorDict shaped like td: batch size newBatch(td's),
// each tensor leaf replaced by fn's result, nested TensorDicts rebuilt the same
// way and non-tensor values deep-copied. Results are checked against the new
// batch sizes. The class name is kept; lock, consolidation and memmap state
// are not.
//
// layout says fn is a layout operation (indexing, slicing, reshaping,
// permuting, expanding): a NonTensorStack follows it through mapStack.
// Otherwise a stack is copied when the batch size stays, and refused when
// it changes (a reduction, a pad).
func (td *TensorDict) rebuild(op string, prefix Key, newBatch func([]int) []int, fn leafFunc, layout bool) (*TensorDict, error) {
	if td == nil {
		return nil, nilError(op)
	}
	out := newTD(newBatch(td.batch))
	out.class = td.class
	out.entries = make([]entry, 0, len(td.entries))
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			k := prefix.child(e.name)
			t, err := callLeaf(op, fn, k, e.t)
			if err != nil {
				return nil, err
			}
			if t == nil {
				continue
			}
			if s := t.Shape(); !hasPrefix(s, out.batch) {
				return nil, fmt.Errorf("tensordict: %s: key %v: result shape %v does not start with batch size %v", op, k, s, out.batch)
			}
			out.add(e.name, entry{kind: kindTensor, t: t})
		case kindTD:
			sub, err := e.td.rebuild(op, prefix.child(e.name), newBatch, fn, layout)
			if err != nil {
				return nil, err
			}
			out.add(e.name, entry{kind: kindTD, td: sub})
		case kindNonTensor:
			v, err := rebuildValue(op, prefix.child(e.name), e.v, td.batch, out.batch, fn, layout)
			if err != nil {
				return nil, err
			}
			out.add(e.name, entry{kind: kindNonTensor, v: v})
		}
	}
	return out, nil
}

// callLeaf returns fn(k, t), for op: a result too large for memory that a
// form of the tensor package without an error result panicked with
// becomes its error, naming op and k (see catchNoMemory).
func callLeaf(op string, fn leafFunc, k Key, t *tensor.Tensor) (_ *tensor.Tensor, err error) {
	defer catchNoMemory(&err, op, k)
	return fn(k, t)
}

// catchNoMemory, deferred by a function that returns an error, turns a
// panic of the tensor package for a result too large for memory (an error
// value wrapping ErrNoMemory, from the forms without an error result such
// as Clone, Contiguous, To or Ones) into *err, prefixed with op and, if
// not nil, key k (left as it is for an empty op); other panics go on.
func catchNoMemory(err *error, op string, k Key) {
	p := recover()
	if p == nil {
		return
	}
	e, ok := p.(error)
	if !ok || !errors.Is(e, ErrNoMemory) {
		panic(p)
	}
	switch {
	case op == "":
		*err = e
	case k == nil:
		*err = fmt.Errorf("tensordict: %s: %w", op, e)
	default:
		*err = fmt.Errorf("tensordict: %s: key %v: %w", op, k, e)
	}
}

// rebuildValue is the non-tensor value k of a rebuild (see rebuild) from
// batch size batch to nb.
func rebuildValue(op string, k Key, v any, batch, nb []int, fn leafFunc, layout bool) (any, error) {
	s, ok := v.(*NonTensorStack)
	switch {
	case !ok:
		return cloneValue(v), nil
	case layout:
		return mapStack(k, s, nb, fn)
	case equalInts(batch, nb):
		return cloneStack(s), nil
	}
	return nil, fmt.Errorf("tensordict: %s: key %v: a NonTensorStack (values that differ along the batch) cannot follow batch size %v to %v", op, k, batch, nb)
}

// sameBatch is the newBatch function of rebuilds that keep batch sizes.
func sameBatch(b []int) []int { return b }

// Apply returns a new TensorDict whose tensor leaves are fn's results for
// td's leaves, visited depth first in insertion order. A nil result drops the
// leaf; an error stops Apply and is returned. Results must keep the batch
// size as their leading dimensions. Nested TensorDicts and non-tensor values
// are kept (non-tensor values are copied).
func (td *TensorDict) Apply(fn func(Key, *tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return guarded("Apply", func() (*TensorDict, error) { return td.rebuild("Apply", nil, sameBatch, fn, false) })
}

// mustRebuild is rebuild for leaf functions that return no error.
// It returns nil for a nil td. A fault reading a mapped leaf (a file
// another process truncated) panics with an error wrapping memmap.ErrFault
// (see faultPanics), and a result too large for memory with an error
// wrapping ErrNoMemory that names the key.
func (td *TensorDict) mustRebuild(op string, fn func(*tensor.Tensor) *tensor.Tensor) *TensorDict {
	if td == nil {
		return nil
	}
	var out *TensorDict
	var err error
	faultPanics(op, func() {
		out, err = td.rebuild(op, nil, sameBatch, func(_ Key, t *tensor.Tensor) (*tensor.Tensor, error) { return fn(t), nil }, false)
	})
	if err != nil {
		panic(err) // an error value, prefixed with op, that recover returns
	}
	return out
}

// Clone returns a deep copy of td: every leaf copied into new contiguous
// storage, non-tensor values copied. Like Python tensordict, the clone is not
// locked, consolidated or memory-mapped; it keeps the class name. The clone
// of a nil *TensorDict is nil.
//
// Clone returns no error: if a memory-mapped leaf's file was truncated by
// another process, it panics with an error wrapping memmap.ErrFault, which
// memmap.Guard around the call returns (instead of the process ending with
// SIGBUS); and if a copy would not fit in memory (its size is checked
// before it is allocated, see tensor.ErrNoMemory), it panics with an error
// wrapping ErrNoMemory that names the key, which recover returns (instead
// of the Go runtime's fatal "out of memory"). The scalar operations
// (EqScalar, MulScalar, ...), Contiguous and To do the same. Apply with
// tensor.Tensor.Clone returns that error instead, as every operation with
// an error result does.
func (td *TensorDict) Clone() *TensorDict {
	return td.mustRebuild("Clone", (*tensor.Tensor).Clone)
}

// IsContiguous reports whether every tensor leaf is contiguous.
func (td *TensorDict) IsContiguous() bool {
	err := td.walkLeaves(nil, func(_ Key, n *TensorDict, j int) error {
		if !n.entries[j].t.IsContiguous() {
			return errStop
		}
		return nil
	})
	return err == nil
}

// faultPanics runs f, which reads td's leaves, so that a fault on a mapped
// leaf panics with an error wrapping memmap.ErrFault that names op, which
// the caller can recover and memmap.Guard returns, instead of ending the
// process with SIGBUS: for the operations that return no error.
func faultPanics(op string, f func()) { mem.PanicOnFault("tensordict: "+op, f) }

// errStop ends a walk early.
var errStop = fmt.Errorf("tensordict: stop")

// Contiguous returns td itself if every leaf is contiguous, and otherwise a
// new TensorDict whose leaves are contiguous (copies of the leaves that were
// not, the others shared). It panics as Clone does: a copy too large for
// memory, as that of a large Expand result, is a panic with an error
// wrapping ErrNoMemory; ContiguousChecked returns it instead.
func (td *TensorDict) Contiguous() *TensorDict {
	if td.IsContiguous() {
		return td
	}
	return td.mustRebuild("Contiguous", (*tensor.Tensor).Contiguous)
}

// ContiguousChecked is Contiguous with an error where Contiguous panics: a
// copy too large for memory (checked before anything is allocated, an
// error wrapping ErrNoMemory that names the key, as torch raises one for
// td.expand(...).contiguous()), a fault reading a memory-mapped leaf
// (wrapping memmap.ErrFault), a released storage, or a nil td (ErrNil).
func (td *TensorDict) ContiguousChecked() (*TensorDict, error) {
	if td == nil {
		return nil, nilError("ContiguousChecked")
	}
	if td.IsContiguous() {
		return td, nil
	}
	var out *TensorDict
	err := mem.CatchFault(func() (err error) {
		out, err = td.indexed("ContiguousChecked", sameBatch, (*tensor.Tensor).ContiguousChecked)
		return err
	})
	if errors.Is(err, mem.ErrFault) {
		return nil, fmt.Errorf("tensordict: ContiguousChecked: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// To returns a new TensorDict with every tensor leaf converted to dtype dt
// (leaves already of dtype dt are shared, not copied).
func (td *TensorDict) To(dt tensor.DType) *TensorDict {
	return td.mustRebuild("To", func(t *tensor.Tensor) *tensor.Tensor {
		if t.DType() == dt {
			return t
		}
		return t.To(dt)
	})
}

// Expand returns a view of td with batch size shape, like Python tensordict's
// expand: shape ends with the current batch dimensions (a size-1 dimension may
// grow, -1 keeps a size) and may add leading ones. Each leaf becomes a
// stride-0 view; call Contiguous before sending or saving the result.
func (td *TensorDict) Expand(shape ...int) (*TensorDict, error) {
	bd := len(td.batch)
	if len(shape) < bd {
		return nil, fmt.Errorf("tensordict: Expand: shape %v has fewer dimensions than batch size %v", shape, td.batch)
	}
	lead := len(shape) - bd
	nb := append([]int(nil), shape...)
	for i, s := range shape {
		if i < lead {
			if s < 0 {
				return nil, fmt.Errorf("tensordict: Expand: shape %v: new dimension %d is negative", shape, i)
			}
			continue
		}
		cur := td.batch[i-lead]
		switch {
		case s == -1:
			nb[i] = cur
		case s == cur || (cur == 1 && s >= 0):
		default:
			return nil, fmt.Errorf("tensordict: Expand: cannot expand batch size %v to %v (dimension %d is %d, not 1)", td.batch, shape, i, cur)
		}
	}
	if _, err := tensor.Numel(nb); err != nil {
		return nil, fmt.Errorf("tensordict: Expand: batch size %v: %w", nb, err)
	}
	newBatch := func(b []int) []int { return append(append(make([]int, 0, len(b)+lead), nb...), b[bd:]...) }
	return td.rebuild("Expand", nil, newBatch, func(k Key, t *tensor.Tensor) (*tensor.Tensor, error) {
		s := t.Shape()
		x, err := t.Expand(append(append(make([]int, 0, len(s)+lead), nb...), s[bd:]...)...)
		if err != nil {
			return nil, fmt.Errorf("tensordict: Expand: key %v: %w", k, err)
		}
		return x, nil
	}, true)
}

// Update merges the entries of o into td: tensor leaves and non-tensor values
// are set (shared, not copied) and nested TensorDicts are merged key by key,
// creating missing levels. On error, the entries merged so far stay. On a
// locked td, only existing entries can be updated. Options (UpdateInPlace,
// UpdateKeys, UpdateClone) are those of Python's update.
func (td *TensorDict) Update(o *TensorDict, opts ...UpdateOption) error {
	if o == nil {
		return fmt.Errorf("tensordict: Update: nil tensordict")
	}
	c := updateOptions(opts)
	return guardFault("Update", func() error { return td.update(nil, o, c) })
}

func (td *TensorDict) update(prefix Key, o *TensorDict, c *updateConfig) error {
	for i := range o.entries {
		e := &o.entries[i]
		k := prefix.child(e.name)
		if !c.selected(k) {
			continue
		}
		var err error
		switch e.kind {
		case kindTensor:
			err = td.updateLeaf(k, e.t, c)
		case kindNonTensor:
			err = td.SetNonTensor(k, e.v)
		case kindTD:
			if _, err = td.GetTD(k); err != nil {
				if c.strict {
					return fmt.Errorf("tensordict: UpdateInPlace: %w", err)
				}
				if err = td.SetTD(k, newTD(e.td.batch)); err != nil {
					return fmt.Errorf("tensordict: Update: %w", err)
				}
			}
			err = td.update(k, e.td, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// keyTree is a set of keys arranged by parts; a node with whole set selects
// the entire entry.
type keyTree struct {
	whole bool
	sub   map[string]*keyTree
}

func buildKeyTree(keys []Key) *keyTree {
	root := &keyTree{}
	for _, k := range keys {
		n := root
		for _, p := range k {
			if n.sub == nil {
				n.sub = make(map[string]*keyTree)
			}
			c := n.sub[p]
			if c == nil {
				c = &keyTree{}
				n.sub[p] = c
			}
			n = c
		}
		n.whole = true
	}
	return root
}

// Select returns a new TensorDict holding only the entries named by keys
// (nested keys select inside nested TensorDicts), in td's order. Tensors are
// shared, not copied. It returns an error naming the first key td lacks.
func (td *TensorDict) Select(keys ...Key) (*TensorDict, error) {
	for _, k := range keys {
		if _, _, err := td.find("Select", k); err != nil {
			return nil, err
		}
	}
	return td.filter(buildKeyTree(keys), true), nil
}

// Exclude returns a new TensorDict without the entries named by keys; keys
// that td lacks are ignored. Tensors are shared, not copied.
func (td *TensorDict) Exclude(keys ...Key) *TensorDict {
	for _, k := range keys {
		if len(k) == 0 {
			return td.filter(&keyTree{}, false)
		}
	}
	return td.filter(buildKeyTree(keys), false)
}

// filter keeps (keep=true) or drops the entries named by kt.
func (td *TensorDict) filter(kt *keyTree, keep bool) *TensorDict {
	out := newTD(td.batch)
	for i := range td.entries {
		e := td.entries[i]
		c := kt.sub[e.name]
		switch {
		case c == nil:
			if keep {
				continue
			}
		case c.whole:
			if !keep {
				continue
			}
		default: // a key below this entry
			if e.kind != kindTD {
				if keep {
					continue
				}
				break
			}
			e.td = e.td.filter(c, keep)
		}
		if e.kind == kindNonTensor {
			e.v = cloneValue(e.v)
		}
		out.add(e.name, e)
	}
	return out
}

// FlattenKeys returns a new TensorDict with every nested entry moved to the
// top level under its key parts joined by sep ("a","b" -> "a.b" for sep ".").
// Empty nested TensorDicts are kept, under their joined name. Tensors are
// shared. It returns an error if two joined names collide.
func (td *TensorDict) FlattenKeys(sep string) (*TensorDict, error) {
	out := newTD(td.batch)
	out.class = td.class
	var err error
	td.flattenInto(out, nil, sep, &err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (td *TensorDict) flattenInto(out *TensorDict, prefix Key, sep string, errp *error) {
	for i := range td.entries {
		e := td.entries[i]
		k := prefix.child(e.name)
		if e.kind == kindTD && len(e.td.entries) > 0 {
			e.td.flattenInto(out, k, sep, errp)
			if *errp != nil {
				return
			}
			continue
		}
		name := strings.Join(k, sep)
		if _, dup := out.lookup(name); dup {
			*errp = fmt.Errorf("tensordict: FlattenKeys: key %v and another key both flatten to %q", k, name)
			return
		}
		if e.kind == kindTD {
			e.td = newTD(e.td.batch)
		}
		if e.kind == kindNonTensor {
			if st, ok := e.v.(*NonTensorStack); ok && !equalInts(st.shape, out.batch) {
				*errp = fmt.Errorf("tensordict: FlattenKeys: key %v is a NonTensorStack of batch size %v, which cannot move to batch size %v", k, st.shape, out.batch)
				return
			}
			e.v = cloneValue(e.v)
		}
		out.add(name, e)
	}
}

// UnflattenKeys is the inverse of FlattenKeys: it returns a new TensorDict in
// which every top-level key containing sep is split into nested keys, creating
// nested TensorDicts with the batch size of td. Tensors are shared. It returns
// an error if two keys conflict (such as "a" a tensor and "a.b").
func (td *TensorDict) UnflattenKeys(sep string) (*TensorDict, error) {
	if sep == "" {
		return nil, fmt.Errorf("tensordict: UnflattenKeys: empty separator")
	}
	out := newTD(td.batch)
	out.class = td.class
	for i := range td.entries {
		e := &td.entries[i]
		k := Key(strings.Split(e.name, sep))
		var err error
		switch e.kind {
		case kindTensor:
			err = out.Set(k, e.t)
		case kindNonTensor:
			err = out.SetNonTensor(k, e.v)
		case kindTD:
			var sub *TensorDict
			if sub, err = e.td.UnflattenKeys(sep); err != nil {
				return nil, err
			}
			if _, gerr := out.GetTD(k); gerr == nil {
				err = out.update(k, sub, &updateConfig{})
			} else {
				err = out.SetTD(k, sub)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("tensordict: UnflattenKeys: entry %q: %w", e.name, err)
		}
	}
	return out, nil
}
