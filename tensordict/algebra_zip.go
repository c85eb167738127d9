package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/tensor"
)

// zipSpec says how zip combines TensorDicts of the same structure.
type zipSpec struct {
	op string
	// batch returns the batch size of the result node from the inputs'
	// batch sizes at that node, or an error.
	batch func(batches [][]int) ([]int, error)
	// leaf returns the result leaf k from the inputs' leaves k (nil drops
	// it).
	leaf func(k Key, ts []*tensor.Tensor) (*tensor.Tensor, error)
	// nonTensor returns the result value k from the inputs' values, held
	// at the inputs' batch sizes batches, for a result of batch size nb;
	// nil means the value of the first input, which the others must equal.
	nonTensor func(k Key, vs []any, batches [][]int, nb []int) (any, error)
}

// zip walks TensorDicts that have the same keys at every level (in any
// order; the result has the first one's order) and builds the result the
// spec describes. An error names the first key that differs (wrapping
// ErrMismatch when keys, kinds or batch sizes differ), or the first key
// whose leaves the spec refuses.
func zip(s *zipSpec, tds []*TensorDict) (*TensorDict, error) {
	for i, o := range tds {
		if o == nil {
			return nil, fmt.Errorf("tensordict: %s: tensordict %d is nil", s.op, i)
		}
	}
	return guarded(s.op, func() (*TensorDict, error) { return zipAt(s, nil, tds) })
}

func zipAt(s *zipSpec, prefix Key, tds []*TensorDict) (*TensorDict, error) {
	first := tds[0]
	batches := make([][]int, len(tds))
	for n, o := range tds {
		batches[n] = o.batch
		if len(o.entries) != len(first.entries) {
			for i := range o.entries {
				if _, ok := first.lookup(o.entries[i].name); !ok {
					return nil, fmt.Errorf("tensordict: %s: key %v of tensordict %d missing from tensordict 0 (keys %v vs %v): %w", s.op, prefix.child(o.entries[i].name), n, o.names(), first.names(), ErrMismatch)
				}
			}
			// o lacks a key of first: the loop below names it.
		}
	}
	nb, err := s.batch(batches)
	if err != nil {
		return nil, fmt.Errorf("tensordict: %s: at %v: %w: %w", s.op, keyOrRoot(prefix), err, ErrMismatch)
	}
	out := newTD(nb)
	out.class = first.class
	out.entries = make([]entry, 0, len(first.entries))
	parts := make([]*entry, len(tds))
	for i := range first.entries {
		e := &first.entries[i]
		k := prefix.child(e.name)
		for n, o := range tds {
			j, ok := o.lookup(e.name)
			if !ok {
				return nil, fmt.Errorf("tensordict: %s: key %v missing from tensordict %d: %w", s.op, k, n, ErrMismatch)
			}
			if parts[n] = &o.entries[j]; parts[n].kind != e.kind {
				return nil, fmt.Errorf("tensordict: %s: key %v is a %v in tensordict %d and a %v in tensordict 0: %w", s.op, k, parts[n].kind, n, e.kind, ErrMismatch)
			}
		}
		switch e.kind {
		case kindTensor:
			ts := make([]*tensor.Tensor, len(tds))
			for n, p := range parts {
				ts[n] = p.t
			}
			t, err := s.leafOf(k, ts)
			if err != nil {
				return nil, fmt.Errorf("tensordict: %s: key %v: %w", s.op, k, err)
			}
			if t == nil {
				continue
			}
			if sh := t.Shape(); !hasPrefix(sh, nb) {
				return nil, fmt.Errorf("tensordict: %s: key %v: result shape %v does not start with batch size %v", s.op, k, sh, nb)
			}
			out.add(e.name, entry{kind: kindTensor, t: t})
		case kindTD:
			subs := make([]*TensorDict, len(tds))
			for n, p := range parts {
				subs[n] = p.td
			}
			sub, err := zipAt(s, k, subs)
			if err != nil {
				return nil, err
			}
			out.add(e.name, entry{kind: kindTD, td: sub})
		case kindNonTensor:
			vs := make([]any, len(tds))
			for n, p := range parts {
				vs[n] = p.v
			}
			v, err := s.value(k, vs, batches, nb)
			if err != nil {
				return nil, err
			}
			if st, ok := v.(*NonTensorStack); ok && !equalInts(st.shape, nb) {
				return nil, fmt.Errorf("tensordict: %s: key %v: a NonTensorStack (values that differ along the batch) of shape %v cannot take batch size %v", s.op, k, st.shape, nb)
			}
			out.add(e.name, entry{kind: kindNonTensor, v: v})
		}
	}
	return out, nil
}

// leafOf returns s.leaf(k, ts): a result too large for memory that a form
// of the tensor package without an error result panicked with becomes
// its error (see catchNoMemory).
func (s *zipSpec) leafOf(k Key, ts []*tensor.Tensor) (_ *tensor.Tensor, err error) {
	defer catchNoMemory(&err, "", nil)
	return s.leaf(k, ts)
}

// value combines the non-tensor values k of the inputs.
func (s *zipSpec) value(k Key, vs []any, batches [][]int, nb []int) (any, error) {
	if s.nonTensor != nil {
		v, err := s.nonTensor(k, vs, batches, nb)
		if err != nil {
			return nil, fmt.Errorf("tensordict: %s: %w", s.op, err)
		}
		return v, nil
	}
	for n, v := range vs[1:] {
		if !equalValues(v, vs[0]) {
			return nil, fmt.Errorf("tensordict: %s: non-tensor key %v differs between tensordict 0 and %d (only equal values can be combined)", s.op, k, n+1)
		}
	}
	return cloneValue(vs[0]), nil
}

// firstValue keeps the non-tensor value of the first input, whatever the
// others hold.
func firstValue(_ Key, vs []any, _ [][]int, _ []int) (any, error) { return cloneValue(vs[0]), nil }

// sameBatches is the batch function of element-wise zips: every input must
// have the first one's batch size.
func sameBatches(batches [][]int) ([]int, error) {
	for n, b := range batches[1:] {
		if !equalInts(b, batches[0]) {
			return nil, fmt.Errorf("tensordict %d has batch size %v, tensordict 0 has %v", n+1, b, batches[0])
		}
	}
	return batches[0], nil
}

// zip2 combines td and o leaf by leaf with fn, keeping td's batch size and
// non-tensor values.
func (td *TensorDict) zip2(op string, o *TensorDict, fn func(a, b *tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return zip(&zipSpec{
		op:        op,
		batch:     sameBatches,
		leaf:      func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return fn(ts[0], ts[1]) },
		nonTensor: firstValue,
	}, []*TensorDict{td, o})
}

// zip2InPlace checks that o has td's structure, then applies fn to each
// pair of leaves, which writes into td's leaf. On an error from fn, the
// leaves before the failing one have been written.
func (td *TensorDict) zip2InPlace(op string, o *TensorDict, fn func(a, b *tensor.Tensor) error) error {
	if _, err := td.zip2(op, o, func(a, _ *tensor.Tensor) (*tensor.Tensor, error) { return a, nil }); err != nil {
		return err
	}
	_, err := td.zip2(op, o, func(a, b *tensor.Tensor) (*tensor.Tensor, error) { return a, fn(a, b) })
	return err
}

// eachLeaf applies fn to every tensor leaf of td in place, naming the key in
// an error.
func (td *TensorDict) eachLeaf(op string, fn func(t *tensor.Tensor) error) error {
	return td.guardedWalk(op, func(k Key, n *TensorDict, j int) error {
		if err := fn(n.entries[j].t); err != nil {
			return fmt.Errorf("tensordict: %s: key %v: %w", op, k, err)
		}
		return nil
	})
}

// mapLeaves returns a TensorDict with td's structure whose leaves are fn of
// td's, naming the key in an error.
func (td *TensorDict) mapLeaves(op string, fn func(t *tensor.Tensor) (*tensor.Tensor, error)) (*TensorDict, error) {
	return td.indexed(op, sameBatch, fn)
}
