package tensor

import "fmt"

// Where returns the elements of x where cond is true and those of y
// elsewhere, like torch.where(cond, x, y): cond must be a bool tensor; cond,
// x and y broadcast against each other; the result has the promoted dtype of
// x and y. It returns an error if cond is not bool, the shapes do not
// broadcast or a storage was released.
func Where(cond, x, y *Tensor) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if cond.dtype != Bool {
		return nil, fmt.Errorf("tensor: Where: condition is %v, need bool", cond.dtype)
	}
	ins := []*Tensor{cond, x, y}
	shape := []int{}
	for _, a := range ins {
		s, ok := broadcastShapes(shape, a.shape())
		if !ok {
			return nil, fmt.Errorf("tensor: Where: shapes %v do not broadcast", shapesOf(ins))
		}
		shape = s
		if err := a.st.checkLive("Where"); err != nil {
			return nil, err
		}
	}
	res := PromoteTypes(x.dtype, y.dtype)
	if x.dtype != res {
		x = x.To(res)
	}
	if y.dtype != res {
		y = y.To(res)
	}
	out := mustAlloc("Where", res, shape, true)
	switch res.Size() {
	case 1:
		whereKernel[uint8](out, cond, x, y)
	case 2:
		whereKernel[uint16](out, cond, x, y)
	case 4:
		whereKernel[uint32](out, cond, x, y)
	case 8:
		whereKernel[uint64](out, cond, x, y)
	default:
		whereKernel[[2]uint64](out, cond, x, y)
	}
	return out, nil
}

// whereKernel picks the elements of out (contiguous) from x or y by cond, all
// broadcast to out's shape; T is any type of the element size.
func whereKernel[T any](out, cond, x, y *Tensor) {
	o, c, a, b := rawElems[T](out), elems[bool](cond), rawElems[T](x), rawElems[T](y)
	strides := [][]int{out.strides(), cond.broadcastStrides(out.shape()), x.broadcastStrides(out.shape()), y.broadcastStrides(out.shape())}
	forRows(out.shape(), strides, func(p []int, n int, s []int) {
		i, j, k, l := p[0], p[1], p[2], p[3]
		for range n {
			if c[j] {
				o[i] = a[k]
			} else {
				o[i] = b[l]
			}
			i += s[0]
			j += s[1]
			k += s[2]
			l += s[3]
		}
	})
}

// MaskedFill returns a copy of t with v, converted to t's dtype as Full
// converts it, wherever mask is true, like torch.masked_fill: mask is a bool
// tensor that broadcasts with t. It returns an error if v does not fit t's
// dtype (NaN into an integer tensor, as torch raises).
func (t *Tensor) MaskedFill(mask *Tensor, v float64) (*Tensor, error) {
	if mask.dtype != Bool {
		return nil, fmt.Errorf("tensor: MaskedFill: mask is %v, need bool", mask.dtype)
	}
	if _, ok := broadcastShapes(mask.shape(), t.shape()); !ok {
		return nil, fmt.Errorf("tensor: MaskedFill: mask shape %v and tensor shape %v do not broadcast", mask.shape(), t.shape())
	}
	if err := checkScalar(t.dtype, v); err != nil {
		return nil, fmt.Errorf("tensor: MaskedFill: %w", err)
	}
	return Where(mask, Full(t.dtype, v), t)
}

// MaskedFillInPlace sets the elements of t where mask is true to v, like
// torch's masked_fill_; mask must broadcast to t's shape.
func (t *Tensor) MaskedFillInPlace(mask *Tensor, v float64) error {
	if s, ok := broadcastShapes(t.shape(), mask.shape()); !ok || !equalInts(s, t.shape()) {
		return fmt.Errorf("tensor: MaskedFillInPlace: mask shape %v does not broadcast to %v", mask.shape(), t.shape())
	}
	return t.store("MaskedFillInPlace")(t.MaskedFill(mask, v))
}
