package tensor

import "fmt"

// operands holds two tensors prepared for an element-wise operation: both of
// the compute dtype, with strides that broadcast them to shape.
type operands struct {
	a, b   *Tensor
	shape  []int
	sa, sb []int
}

// prepare checks that t and o are live and broadcast, converts them to dt when
// they are of another dtype, and returns their broadcast strides. op names the
// calling operation in errors.
func prepare(op string, t, o *Tensor, dt DType) (*operands, error) {
	shape, ok := broadcastShapes(t.shape(), o.shape())
	if !ok {
		return nil, fmt.Errorf("tensor: %s: shapes %v and %v do not broadcast", op, t.shape(), o.shape())
	}
	if err := t.st.checkLive(op); err != nil {
		return nil, err
	}
	if err := o.st.checkLive(op); err != nil {
		return nil, err
	}
	a, b := t, o
	if a.dtype != dt {
		a = a.To(dt)
	}
	if b.dtype != dt {
		b = b.To(dt)
	}
	return &operands{a: a, b: b, shape: shape, sa: a.broadcastStrides(shape), sb: b.broadcastStrides(shape)}, nil
}

// map2 sets out (contiguous, of shape) to f of the broadcast elements of a and
// b, which are laid out by strides sa and sb.
func map2[A, B, R any](out []R, a []A, b []B, shape, sa, sb []int, f func(A, B) R) {
	so := contiguousStrides(shape)
	forRows(shape, [][]int{so, sa, sb}, func(p []int, n int, s []int) {
		o, i, j := p[0], p[1], p[2]
		so, si, sj := s[0], s[1], s[2]
		for range n {
			out[o] = f(a[i], b[j])
			o += so
			i += si
			j += sj
		}
	})
}

// map1 sets out (contiguous, of shape) to f of the elements of a, laid out by
// strides sa.
func map1[A, R any](out []R, a []A, shape, sa []int, f func(A) R) {
	so := contiguousStrides(shape)
	forRows(shape, [][]int{so, sa}, func(p []int, n int, s []int) {
		o, i := p[0], p[1]
		so, si := s[0], s[1]
		for range n {
			out[o] = f(a[i])
			o += so
			i += si
		}
	})
}

// visit calls f for every element of a, laid out by strides sa, in row-major
// order, until f returns false.
func visit[A any](a []A, shape, sa []int, f func(A) bool) {
	stop := false
	forRows(shape, [][]int{sa}, func(p []int, n int, s []int) {
		if stop {
			return
		}
		i, si := p[0], s[0]
		for range n {
			if !f(a[i]) {
				stop = true
				return
			}
			i += si
		}
	})
}
