package tensor

import "fmt"

// Fill sets every element of t to v, converted to t's dtype as Full
// converts it, in place, like torch's fill_. It returns an error if v does
// not fit t's dtype (NaN or ±Inf into an integer tensor, 1e10 into int32,
// as torch raises), t repeats elements or its storage was released.
func (t *Tensor) Fill(v float64) error {
	if err := checkScalar(t.dtype, v); err != nil {
		return fmt.Errorf("tensor: Fill: %w", err)
	}
	if err := t.CopyFrom(Full(t.dtype, v)); err != nil {
		return fmt.Errorf("tensor: Fill: %w", err)
	}
	return nil
}

// Zero sets every element of t to zero, in place, like torch's zero_.
func (t *Tensor) Zero() error { return t.Fill(0) }

// IndexPut writes src into the entries idx of dimension dim of t, in place,
// like torch's t[..., idx, ...] = src (index_copy_ with broadcasting): src
// broadcasts to t's shape with dimension dim of size len(idx) and is
// converted to t's dtype; entry idx[k] receives src's entry k. Negative
// indices count from the end; when an index repeats, the last write wins.
// t may be any view that does not repeat elements, so that a write reaches
// the storage t views (a memory-mapped file, say). It returns an error if
// dim or an index is out of range or src does not broadcast.
func (t *Tensor) IndexPut(dim int, idx []int, src *Tensor) error {
	d, err := checkDim("IndexPut", dim, len(t.shape()), t.shape())
	if err != nil {
		return err
	}
	n := t.shape()[d]
	for k, i := range idx {
		if i < -n || i >= n {
			return fmt.Errorf("tensor: IndexPut: index %d (position %d) out of range for dimension %d of shape %v", i, k, dim, t.shape())
		}
	}
	shape := cloneInts(t.shape())
	shape[d] = len(idx)
	if src, err = prepareSource("IndexPut", t, src, shape); err != nil {
		return err
	}
	for k, i := range idx {
		dst, _ := t.Select(d, i)
		s, _ := src.Select(d, k)
		rawCopy(dst, s)
	}
	return nil
}

// MaskPut writes src into the entries of t where mask is true, in place,
// like torch's t[mask] = src: mask is a bool tensor of t's leading shape,
// src broadcasts to the shape MaskSelect would return (the number of true
// elements, then t's remaining dimensions) and is converted to t's dtype.
// t may be any view that does not repeat elements.
func (t *Tensor) MaskPut(mask, src *Tensor) error {
	if err := t.checkMask("MaskPut", mask); err != nil {
		return err
	}
	md := len(mask.shape())
	picks := t.maskOffsets(mask)
	rest := t.shape()[md:]
	src, err := prepareSource("MaskPut", t, src, append([]int{len(picks)}, rest...))
	if err != nil {
		return err
	}
	es := t.dtype.Size()
	for k, off := range picks {
		dst := t.view(rest, t.strides()[md:], t.offset+off*es)
		s, _ := src.Select(0, k)
		rawCopy(dst, s)
	}
	return nil
}

// prepareSource returns src broadcast to shape and converted to t's dtype,
// copied when it shares t's storage, for a write into t named op.
func prepareSource(op string, t, src *Tensor, shape []int) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if err := t.st.checkLive(op); err != nil {
		return nil, err
	}
	if err := src.st.checkLive(op); err != nil {
		return nil, err
	}
	if t.repeats() {
		return nil, fmt.Errorf("tensor: %s: destination of shape %v has strides %v that repeat elements", op, t.shape(), t.strides())
	}
	e, err := src.Expand(shape...)
	if err != nil {
		return nil, fmt.Errorf("tensor: %s: source shape %v does not broadcast to %v", op, src.shape(), shape)
	}
	if e.dtype != t.dtype {
		e = e.To(t.dtype)
	} else if e.st == t.st {
		e = e.Clone()
	}
	return e, nil
}
