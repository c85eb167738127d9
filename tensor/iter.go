package tensor

import (
	"fmt"
	"unsafe"
)

// elems returns t's storage, from t's first element on, as a []T. The element
// at index (i0, i1, ...) of t is at position Σ ik*strides[k] of the result.
// The caller has checked that T matches t's dtype and that the storage is live.
func elems[T Elem](t *Tensor) []T {
	b := t.st.Bytes()
	if t.offset >= len(b) {
		return []T{} // an empty view may point past the end
	}
	b = b[t.offset:]
	var z T
	return fromBytes[T](b, len(b)/int(unsafe.Sizeof(z)))
}

// forRows walks the indices of shape in row-major order, one innermost row at
// a time. strides holds, for each operand, its strides in elements (one per
// dimension of shape; stride 0 repeats). For every row fn receives the
// position of the row's first element in each operand, the row length, and
// each operand's stride along the row. Dimensions are coalesced first, so a
// set of contiguous operands is walked as a single row. Nothing is called for
// an empty shape (a zero dimension); a scalar shape is one row of length 1.
func forRows(shape []int, strides [][]int, fn func(pos []int, n int, step []int)) {
	for _, d := range shape {
		if d == 0 {
			return
		}
	}
	shape, strides = coalesce(shape, strides)
	nd := len(shape)
	pos := make([]int, len(strides))
	step := make([]int, len(strides))
	if nd == 0 {
		fn(pos, 1, step)
		return
	}
	for k := range strides {
		step[k] = strides[k][nd-1]
	}
	inner := shape[nd-1]
	idx := make([]int, nd-1)
	for {
		fn(pos, inner, step)
		d := nd - 2
		for ; d >= 0; d-- {
			idx[d]++
			for k := range strides {
				pos[k] += strides[k][d]
			}
			if idx[d] < shape[d] {
				break
			}
			for k := range strides {
				pos[k] -= idx[d] * strides[k][d]
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// coalesce drops dimensions of size 1 and merges neighbouring dimensions that
// every operand steps through evenly, returning new slices.
func coalesce(shape []int, strides [][]int) ([]int, [][]int) {
	ns := make([]int, 0, len(shape))
	nst := make([][]int, len(strides))
	for k := range nst {
		nst[k] = make([]int, 0, len(shape))
	}
	for d, size := range shape {
		if size == 1 {
			continue
		}
		last := len(ns) - 1
		if last >= 0 {
			merge := true
			for k := range strides {
				if nst[k][last] != strides[k][d]*size {
					merge = false
					break
				}
			}
			if merge {
				ns[last] *= size
				for k := range strides {
					nst[k][last] = strides[k][d]
				}
				continue
			}
		}
		ns = append(ns, size)
		for k := range strides {
			nst[k] = append(nst[k], strides[k][d])
		}
	}
	return ns, nst
}

// broadcastShapes returns the shape that a and b broadcast to, torch style:
// shapes are aligned on the right and each pair of sizes must be equal or
// contain a 1.
func broadcastShapes(a, b []int) ([]int, bool) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		x, y := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			x = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			y = b[j]
		}
		switch {
		case x == y || y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, false
		}
	}
	return out, true
}

// BroadcastShapes returns the shape that tensors of shapes a and b broadcast
// to, following torch: shapes are aligned on the right, missing leading sizes
// count as 1, and each pair of sizes must be equal or contain a 1.
func BroadcastShapes(a, b []int) ([]int, error) {
	out, ok := broadcastShapes(a, b)
	if !ok {
		return nil, fmt.Errorf("tensor: shapes %v and %v do not broadcast", a, b)
	}
	return out, nil
}

// broadcastStrides returns t's strides seen through shape, which t broadcasts
// to: new leading dimensions and stretched size-1 dimensions get stride 0.
func (t *Tensor) broadcastStrides(shape []int) []int {
	out := make([]int, len(shape))
	lead := len(shape) - len(t.shape())
	for i := range t.shape() {
		if t.shape()[i] != 1 {
			out[lead+i] = t.strides()[i]
		}
	}
	return out
}
