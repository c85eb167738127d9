package tensor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Print options shared with PythonRepr, at torch's defaults.
const (
	printThreshold = 1000 // more elements than this are summarized
	printEdgeItems = 3    // elements shown at each end of a summarized dimension
)

// String formats t the Go way: its dtype and shape, then its elements
// nested as fmt prints nested slices, for example
//
//	float32[2 3] [[1 2 3] [4 5 6]]
//	int64[] 7
//	bool[2] [true false]
//	complex64[2] [(1+2i) (3-1i)]
//	float32[2 0] [[] []]
//
// Each element is in its shortest form that reads back as the same value of
// t's dtype (float16 and bfloat16 included): what strconv.FormatFloat with
// precision -1 gives, so 1e+06, NaN, +Inf. A tensor of more than 1000
// elements shows the first and last three of every dimension with "..."
// between them. A tensor whose storage was released prints as
// "float32[2] <released>". PythonRepr formats t as torch prints it.
func (t *Tensor) String() string {
	var b strings.Builder
	b.WriteString(t.dtype.String())
	b.WriteString(formatShape(t.shape()))
	b.WriteByte(' ')
	if t.st.Released() {
		b.WriteString("<released>")
		return b.String()
	}
	summarize := t.Numel() > printThreshold
	t.appendNested(&b, summarize)
	return b.String()
}

// appendNested writes t's elements as nested bracketed lists.
func (t *Tensor) appendNested(b *strings.Builder, summarize bool) {
	if len(t.shape()) == 0 {
		b.WriteString(formatScalar(t.dtype, scalarAt(t, 0)))
		return
	}
	b.WriteByte('[')
	n := t.shape()[0]
	for k, i := range shownIndices(n, summarize) {
		if k > 0 {
			b.WriteByte(' ')
		}
		if summarize && n > 2*printEdgeItems && k == printEdgeItems {
			b.WriteString("... ")
		}
		if len(t.shape()) == 1 {
			b.WriteString(formatScalar(t.dtype, scalarAt(t, i)))
			continue
		}
		s, _ := t.Select(0, i)
		s.appendNested(b, summarize)
	}
	b.WriteByte(']')
}

// FormatElements returns the first n elements of t in row-major order,
// each formatted as String formats it, and whether t has more than n
// elements. It returns nil and false if t's storage was released.
func (t *Tensor) FormatElements(n int) (elems []string, more bool) {
	if t.st.Released() {
		return nil, false
	}
	total := t.Numel()
	m := max(0, min(n, total))
	elems = make([]string, 0, m)
	// flat reads element i of t's storage, counted from t's offset.
	flat := newTensor(t.dtype, []int{total, 1}, t.offset, t.st)
	shape, strides := t.shape(), t.strides()
	idx := make([]int, len(shape))
	for range m {
		off := 0
		for d, i := range idx {
			off += i * strides[d]
		}
		elems = append(elems, formatScalar(t.dtype, scalarAt(flat, off)))
		// Advance the multi-index in row-major order.
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return elems, total > m
}

// scalar is one element read for printing.
type scalar struct {
	re, im float64
	i      int64 // integer and bool dtypes
}

// scalarAt reads element i of the 1-D or 0-D view v (i is 0 for 0-D).
func scalarAt(v *Tensor, i int) scalar {
	p := 0
	if len(v.strides()) > 0 {
		p = i * v.strides()[0]
	}
	switch v.dtype {
	case Bool:
		if elems[bool](v)[p] {
			return scalar{i: 1}
		}
		return scalar{}
	case Uint8:
		return scalar{i: int64(elems[uint8](v)[p])}
	case Int8:
		return scalar{i: int64(elems[int8](v)[p])}
	case Int16:
		return scalar{i: int64(elems[int16](v)[p])}
	case Int32:
		return scalar{i: int64(elems[int32](v)[p])}
	case Int64:
		return scalar{i: elems[int64](v)[p]}
	case Float16:
		return scalar{re: float64(elems[F16](v)[p].Float32())}
	case BFloat16:
		return scalar{re: float64(elems[BF16](v)[p].Float32())}
	case Float32:
		return scalar{re: float64(elems[float32](v)[p])}
	case Float64:
		return scalar{re: elems[float64](v)[p]}
	case Complex64:
		z := elems[complex64](v)[p]
		return scalar{re: float64(real(z)), im: float64(imag(z))}
	default:
		z := elems[complex128](v)[p]
		return scalar{re: real(z), im: imag(z)}
	}
}

// shownIndices returns the indices of a dimension of size n that printing
// shows.
func shownIndices(n int, summarize bool) []int {
	var out []int
	if summarize && n > 2*printEdgeItems {
		for i := range printEdgeItems {
			out = append(out, i)
		}
		for i := n - printEdgeItems; i < n; i++ {
			out = append(out, i)
		}
		return out
	}
	for i := range n {
		out = append(out, i)
	}
	return out
}

// formatShape formats a shape as fmt prints an []int: "[2 3]"; a scalar's
// is "[]".
func formatShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// formatScalar formats one element of dtype dt in its shortest form.
func formatScalar(dt DType, s scalar) string {
	switch dt {
	case Bool:
		return strconv.FormatBool(s.i != 0)
	case Uint8, Int8, Int16, Int32, Int64:
		return strconv.FormatInt(s.i, 10)
	case Float16:
		return formatHalf(s.re, func(f float32) float32 { return F16FromFloat32(f).Float32() })
	case BFloat16:
		return formatHalf(s.re, func(f float32) float32 { return BF16FromFloat32(f).Float32() })
	case Float32:
		return strconv.FormatFloat(s.re, 'g', -1, 32)
	case Complex64:
		return strconv.FormatComplex(complex(s.re, s.im), 'g', -1, 64)
	case Complex128:
		return strconv.FormatComplex(complex(s.re, s.im), 'g', -1, 128)
	}
	return strconv.FormatFloat(s.re, 'g', -1, 64)
}

// formatHalf formats v, a value of a 16-bit float type, with the fewest
// significant digits that round back to v through round (the conversion to
// that type and back).
func formatHalf(v float64, round func(float32) float32) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	// Five significant digits always suffice for float16, four for bfloat16.
	for digits := 1; digits < 9; digits++ {
		x, err := strconv.ParseFloat(strconv.FormatFloat(v, 'e', digits-1, 64), 64)
		if err == nil && float64(round(float32(x))) == v {
			// x is the shortest decimal; formatting it as a float64 prints
			// exactly its digits, in the notation FormatFloat chooses.
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 32)
}

// GoString returns a Go-syntax-like description of t's dtype and shape, for
// %#v.
func (t *Tensor) GoString() string {
	return fmt.Sprintf("tensor.Tensor{dtype: %v, shape: %v}", t.dtype, t.shape())
}
