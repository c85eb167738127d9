package tensor

// The hot element-wise loops, written out per operation so that each compiles
// to a plain loop over one Go type (no function value per element). Each
// kernel walks rows with forRows; rows whose operands all step by one run
// over resliced slices, without index arithmetic or bounds checks.

// cmpRows sets out (contiguous, of shape) to B(a) op b over the broadcast
// elements of a and b, laid out by strides sa and sb.
func cmpRows[A, B realNum](op cmpOp, out []bool, a []A, b []B, shape, sa, sb []int) {
	so := contiguousStrides(shape)
	forRows(shape, [][]int{so, sa, sb}, func(p []int, n int, s []int) {
		o, i, j := p[0], p[1], p[2]
		if s[0] == 1 && s[1] == 1 && s[2] == 0 {
			cmpScalarRow(op, out[o:o+n], a[i:i+n], b[j])
			return
		}
		if s[0] == 1 && s[1] == 1 && s[2] == 1 {
			cmpUnitRow(op, out[o:o+n], a[i:i+n], b[j:j+n])
			return
		}
		so, si, sj := s[0], s[1], s[2]
		for range n {
			out[o] = holds(op, B(a[i]), b[j])
			o += so
			i += si
			j += sj
		}
	})
}

func cmpUnitRow[A, B realNum](op cmpOp, out []bool, a []A, b []B) {
	a, b = a[:len(out)], b[:len(out)]
	switch op {
	case opEq:
		for k := range out {
			out[k] = B(a[k]) == b[k]
		}
	case opNe:
		for k := range out {
			out[k] = B(a[k]) != b[k]
		}
	case opLt:
		for k := range out {
			out[k] = B(a[k]) < b[k]
		}
	case opLe:
		for k := range out {
			out[k] = B(a[k]) <= b[k]
		}
	case opGt:
		for k := range out {
			out[k] = B(a[k]) > b[k]
		}
	default:
		for k := range out {
			out[k] = B(a[k]) >= b[k]
		}
	}
}

func cmpScalarRow[A, B realNum](op cmpOp, out []bool, a []A, v B) {
	a = a[:len(out)]
	switch op {
	case opEq:
		for k := range out {
			out[k] = B(a[k]) == v
		}
	case opNe:
		for k := range out {
			out[k] = B(a[k]) != v
		}
	case opLt:
		for k := range out {
			out[k] = B(a[k]) < v
		}
	case opLe:
		for k := range out {
			out[k] = B(a[k]) <= v
		}
	case opGt:
		for k := range out {
			out[k] = B(a[k]) > v
		}
	default:
		for k := range out {
			out[k] = B(a[k]) >= v
		}
	}
}

// arithRows sets out (contiguous, of shape) to a op b over the broadcast
// elements of a and b.
func arithRows[T number](op arithOp, out, a, b []T, shape, sa, sb []int) {
	so := contiguousStrides(shape)
	forRows(shape, [][]int{so, sa, sb}, func(p []int, n int, s []int) {
		o, i, j := p[0], p[1], p[2]
		if s[0] == 1 && s[1] == 1 && s[2] == 1 {
			arithUnitRow(op, out[o:o+n], a[i:i+n], b[j:j+n])
			return
		}
		if s[0] == 1 && s[1] == 1 && s[2] == 0 {
			arithScalarRow(op, out[o:o+n], a[i:i+n], b[j])
			return
		}
		so, si, sj := s[0], s[1], s[2]
		for range n {
			out[o] = arithOne(op, a[i], b[j])
			o += so
			i += si
			j += sj
		}
	})
}

// arithInPlaceRows sets a to a op b over the elements of a and the broadcast
// elements of b.
func arithInPlaceRows[T number](op arithOp, a, b []T, shape, sa, sb []int) {
	forRows(shape, [][]int{sa, sb}, func(p []int, n int, s []int) {
		i, j := p[0], p[1]
		if s[0] == 1 && s[1] == 1 {
			row := a[i : i+n]
			arithUnitRow(op, row, row, b[j:j+n])
			return
		}
		if s[0] == 1 && s[1] == 0 {
			row := a[i : i+n]
			arithScalarRow(op, row, row, b[j])
			return
		}
		si, sj := s[0], s[1]
		for range n {
			a[i] = arithOne(op, a[i], b[j])
			i += si
			j += sj
		}
	})
}

func arithOne[T number](op arithOp, x, y T) T {
	switch op {
	case opAdd:
		return x + y
	case opSub:
		return x - y
	case opMul:
		return x * y
	default:
		return x / y
	}
}

func arithUnitRow[T number](op arithOp, out, a, b []T) {
	a, b = a[:len(out)], b[:len(out)]
	switch op {
	case opAdd:
		for k := range out {
			out[k] = a[k] + b[k]
		}
	case opSub:
		for k := range out {
			out[k] = a[k] - b[k]
		}
	case opMul:
		for k := range out {
			out[k] = a[k] * b[k]
		}
	default:
		for k := range out {
			out[k] = a[k] / b[k]
		}
	}
}

func arithScalarRow[T number](op arithOp, out, a []T, v T) {
	a = a[:len(out)]
	switch op {
	case opAdd:
		for k := range out {
			out[k] = a[k] + v
		}
	case opSub:
		for k := range out {
			out[k] = a[k] - v
		}
	case opMul:
		for k := range out {
			out[k] = a[k] * v
		}
	default:
		for k := range out {
			out[k] = a[k] / v
		}
	}
}
