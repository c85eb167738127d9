package tensor

import (
	"fmt"
	"math"
)

// Stack joins tensors of one dtype and shape along a new dimension dim, like
// torch.stack; dim may be from -(n+1) to n for n-dimensional inputs. The
// result is new contiguous storage. It returns an error if ts is empty, the
// dtypes or shapes differ, dim is out of range or a storage was released.
func Stack(ts []*Tensor, dim int) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if len(ts) == 0 {
		return nil, fmt.Errorf("tensor: Stack: no tensors")
	}
	first := ts[0]
	nd := len(first.shape())
	d, err := checkDim("Stack", dim, nd+1, first.shape())
	if err != nil {
		return nil, err
	}
	for k, x := range ts {
		if x.dtype != first.dtype || !equalInts(x.shape(), first.shape()) {
			return nil, fmt.Errorf("tensor: Stack: tensor %d is %v%v, tensor 0 is %v%v", k, x.dtype, x.shape(), first.dtype, first.shape())
		}
		if err := x.st.checkLive("Stack"); err != nil {
			return nil, err
		}
	}
	shape := append(append(cloneInts(first.shape()[:d]), len(ts)), first.shape()[d:]...)
	out := mustAlloc("Stack", first.dtype, shape, false) // every element is written below
	n := first.NBytes()
	ob := out.st.Bytes()
	for k, x := range ts {
		if d == 0 && x.IsContiguous() {
			// Its place in out is a contiguous block too: one copy, no
			// view (GatherAndStack stacks every leaf of a TensorDict).
			b, _ := x.Bytes() // live: checked above
			copy(ob[k*n:(k+1)*n], b)
			continue
		}
		dst, _ := out.Select(d, k)
		rawCopy(dst, x)
	}
	return out, nil
}

// Cat joins tensors of one dtype along the existing dimension dim, like
// torch.cat; their other dimensions must agree. The result is new contiguous
// storage. It returns an error if ts is empty, the dtypes or shapes disagree,
// dim is out of range or a storage was released.
func Cat(ts []*Tensor, dim int) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if len(ts) == 0 {
		return nil, fmt.Errorf("tensor: Cat: no tensors")
	}
	first := ts[0]
	d, err := checkDim("Cat", dim, len(first.shape()), first.shape())
	if err != nil {
		return nil, err
	}
	total := 0
	for k, x := range ts {
		ok := x.dtype == first.dtype && len(x.shape()) == len(first.shape())
		for i := 0; ok && i < len(x.shape()); i++ {
			ok = i == d || x.shape()[i] == first.shape()[i]
		}
		if !ok {
			return nil, fmt.Errorf("tensor: Cat: tensor %d is %v%v, tensor 0 is %v%v (only dimension %d may differ)", k, x.dtype, x.shape(), first.dtype, first.shape(), d)
		}
		if err := x.st.checkLive("Cat"); err != nil {
			return nil, err
		}
		if total > math.MaxInt-x.shape()[d] {
			return nil, fmt.Errorf("tensor: Cat: joined dimension overflows")
		}
		total += x.shape()[d]
	}
	shape := cloneInts(first.shape())
	shape[d] = total
	out := mustAlloc("Cat", first.dtype, shape, false) // every element is written below
	at := 0
	for _, x := range ts {
		dst, _ := out.Narrow(d, at, x.shape()[d])
		rawCopy(dst, x)
		at += x.shape()[d]
	}
	return out, nil
}

// Unbind returns the views t.Select(dim, i) for every i, like torch.unbind.
// It returns an error if dim is out of range.
func (t *Tensor) Unbind(dim int) ([]*Tensor, error) {
	d, err := checkDim("Unbind", dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, err
	}
	out := make([]*Tensor, t.shape()[d])
	for i := range out {
		out[i], _ = t.Select(d, i)
	}
	return out, nil
}
