package tensor

import (
	"fmt"
	"math"
)

// MaxDim returns the largest elements of t along dimension dim and their
// positions along it (int64; the first on ties, a NaN before anything
// else, as in torch), like torch.max(t, dim): both have t's shape without
// dim, or with dim of size 1 when keepDim is set. It returns an error if
// dim is out of range, t is complex, or dim has size 0 while the other
// dimensions do not.
func (t *Tensor) MaxDim(dim int, keepDim bool) (values, indices *Tensor, err error) {
	return t.extremeDim("MaxDim", dim, keepDim, 1)
}

// MinDim returns the smallest elements along dim and their positions, like
// MaxDim.
func (t *Tensor) MinDim(dim int, keepDim bool) (values, indices *Tensor, err error) {
	return t.extremeDim("MinDim", dim, keepDim, -1)
}

// extremeDim picks along dim the largest (sign 1) or smallest (sign -1)
// elements of t.
func (t *Tensor) extremeDim(name string, dim int, keepDim bool, sign int) (_, _ *Tensor, err error) {
	defer catchNoMemory(&err)
	d, err := checkDim(name, dim, len(t.shape()), t.shape())
	if err != nil {
		return nil, nil, err
	}
	if t.dtype.IsComplex() {
		return nil, nil, fmt.Errorf("tensor: %s: not supported for %v", name, t.dtype)
	}
	if err := t.st.checkLive(name); err != nil {
		return nil, nil, err
	}
	n, outer := t.shape()[d], 1
	perm := make([]int, 0, len(t.shape()))
	for i, s := range t.shape() {
		if i != d {
			perm = append(perm, i)
			outer *= s
		}
	}
	if n == 0 && outer > 0 {
		return nil, nil, fmt.Errorf("tensor: %s: dimension %d of shape %v is empty", name, dim, t.shape())
	}
	moved, _ := t.Permute(append(perm, d)...)
	shape := cloneInts(t.shape())
	if keepDim {
		shape[d] = 1
	} else {
		shape = append(shape[:d], shape[d+1:]...)
	}
	pos := make([]int64, outer)
	var vals *Tensor
	if category(t.dtype) <= 1 {
		// Integers compare as int64: float64 would round those beyond 2^53.
		vals = pickRows(moved.To(Int64), pos, n, func(a, b int64) bool { return sign*cmpInts(a, b) > 0 })
	} else {
		vals = pickRows(moved.To(Float64), pos, n, func(a, b float64) bool {
			if math.IsNaN(b) {
				return false
			}
			return math.IsNaN(a) || sign > 0 && a > b || sign < 0 && a < b
		})
	}
	vals, _ = vals.Reshape(shape...)
	idx, _ := FromSlice(pos) // 1-D: FromSlice reads no shape as that
	idx, _ = idx.Reshape(shape...)
	return vals.To(t.dtype), idx, nil
}

// cmpInts returns -1, 0 or 1 as a is below, equal to or above b.
func cmpInts(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pickRows sets pos[r] to the position, in row r (of length n) of the
// contiguous x, of the first element that no later one beats, and returns
// those elements as a 1-D tensor of x's dtype.
func pickRows[T int64 | float64](x *Tensor, pos []int64, n int, beats func(a, b T) bool) *Tensor {
	src := elems[T](x)
	out := mustAlloc("MaxDim or MinDim", x.dtype, []int{len(pos)}, true)
	dst := elems[T](out)
	for r := range pos {
		row := src[r*n : (r+1)*n]
		best := 0
		for i := 1; i < n; i++ {
			if beats(row[i], row[best]) {
				best = i
			}
		}
		pos[r], dst[r] = int64(best), row[best]
	}
	return out
}
