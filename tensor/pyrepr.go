package tensor

import (
	"math"
	"strconv"
	"strings"
)

// torch's default print options for the width and notation of elements
// (the summarizing ones, printThreshold and printEdgeItems, are String's as
// well).
const (
	printLineWidth = 80
	printPrecision = 4
)

// PythonRepr formats t the way torch prints a tensor with its default print
// options, for people comparing output with Python's; String is the Go form.
// For example
//
//	tensor([[1., 1.],
//	        [1., 1.]])
//
// Floating values share one notation: integers with a trailing dot, four
// decimals, or scientific when magnitudes span more than 1000 or leave
// [1e-4, 1e8]. Tensors of more than 1000 elements show three items at each
// end of every dimension with "..." between them. The dtype is appended when
// torch shows it: for every dtype but float32, complex64, int64 and bool, and
// for empty tensors not of float32. A tensor whose storage was released
// prints as "tensor(<released>)".
func (t *Tensor) PythonRepr() string {
	if t.st.Released() {
		return "tensor(<released>)"
	}
	const prefix = "tensor("
	indent := len(prefix)
	var suffixes []string
	var body string
	if t.Numel() == 0 {
		if len(t.shape()) != 1 {
			suffixes = append(suffixes, "size="+pyTuple(t.shape()))
		}
		if t.dtype != Float32 {
			suffixes = append(suffixes, "dtype="+t.dtype.TorchName())
		}
		body = "[]"
	} else {
		switch t.dtype {
		case Float32, Complex64, Int64, Bool:
		default:
			suffixes = append(suffixes, "dtype="+t.dtype.TorchName())
		}
		body = t.formatBody(indent)
	}
	return addSuffixes(prefix+body, suffixes, indent)
}

// addSuffixes appends ", suffix" for each suffix, breaking the line first
// when it would grow past the line width, and closes the parenthesis.
func addSuffixes(s string, suffixes []string, indent int) string {
	var b strings.Builder
	b.WriteString(s)
	// torch counts the last line this way, two more than its length.
	last := len(s) - strings.LastIndexByte(s, '\n') + 1
	for _, suf := range suffixes {
		if last+len(suf)+2 > printLineWidth {
			b.WriteString(",\n" + strings.Repeat(" ", indent) + suf)
			last = indent + len(suf)
		} else {
			b.WriteString(", " + suf)
			last += len(suf) + 2
		}
	}
	b.WriteByte(')')
	return b.String()
}

// pyTuple formats a shape as a Python tuple: (2, 0) or (0,).
func pyTuple(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	if len(s) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// printed calls fn for every element that printing shows, in order.
func printed(t *Tensor, summarize bool, fn func(scalar)) {
	switch len(t.shape()) {
	case 0:
		fn(scalarAt(t, 0))
		return
	case 1:
		for _, i := range shownIndices(t.shape()[0], summarize) {
			fn(scalarAt(t, i))
		}
		return
	}
	for _, i := range shownIndices(t.shape()[0], summarize) {
		s, _ := t.Select(0, i)
		printed(s, summarize, fn)
	}
}

// formatter formats the values of one tensor (or of one part of a complex
// tensor) in a common notation and width, as torch's _Formatter does.
type formatter struct {
	floating bool
	intMode  bool
	sciMode  bool
	width    int
	boolean  bool
}

func newFormatter(dt DType, vals []scalar, part func(scalar) float64) *formatter {
	f := &formatter{floating: dt.IsFloat() || dt.IsComplex(), intMode: true, width: 1, boolean: dt == Bool}
	if !f.floating {
		for _, v := range vals {
			f.width = max(f.width, len(f.formatInt(v.i)))
		}
		return f
	}
	var finite []float64
	lo, hi := math.Inf(1), 0.0
	for _, s := range vals {
		v := part(s)
		if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		finite = append(finite, v)
		lo, hi = min(lo, math.Abs(v)), max(hi, math.Abs(v))
		if v != math.Ceil(v) {
			f.intMode = false
		}
	}
	if len(finite) == 0 {
		return f
	}
	if hi/lo > 1000 || hi > 1e8 || !f.intMode && lo < 1e-4 {
		f.sciMode = true
	}
	for _, v := range finite {
		n := len(f.formatFloat(v))
		f.width = max(f.width, n)
	}
	return f
}

// formatInt formats an integer or bool element as Python's str does.
func (f *formatter) formatInt(i int64) string {
	if f.boolean {
		if i != 0 {
			return "True"
		}
		return "False"
	}
	return strconv.FormatInt(i, 10)
}

// formatFloat formats v unpadded in the formatter's notation.
func (f *formatter) formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case f.sciMode:
		return strconv.FormatFloat(v, 'e', printPrecision, 64)
	case f.intMode:
		return strconv.FormatFloat(v, 'f', 0, 64) + "."
	default:
		return strconv.FormatFloat(v, 'f', printPrecision, 64)
	}
}

// pad right-aligns s in the formatter's width.
func (f *formatter) pad(s string) string {
	if n := f.width - len(s); n > 0 {
		return strings.Repeat(" ", n) + s
	}
	return s
}

// formatBody formats the bracketed elements of the non-empty tensor t.
func (t *Tensor) formatBody(indent int) string {
	summarize := t.Numel() > printThreshold
	var vals []scalar
	printed(t, summarize, func(s scalar) { vals = append(vals, s) })
	f1 := newFormatter(t.dtype, vals, func(s scalar) float64 { return s.re })
	var f2 *formatter
	if t.dtype.IsComplex() {
		f2 = newFormatter(t.dtype, vals, func(s scalar) float64 { return s.im })
	}
	p := &printer{f1: f1, f2: f2, summarize: summarize}
	return p.tensor(t, indent)
}

// printer lays out a tensor's elements with its formatters.
type printer struct {
	f1, f2    *formatter
	summarize bool
}

// value formats one element, padded.
func (p *printer) value(s scalar) string {
	if !p.f1.floating {
		return p.f1.pad(p.f1.formatInt(s.i))
	}
	re := p.f1.pad(p.f1.formatFloat(s.re))
	if p.f2 == nil {
		return re
	}
	im := strings.TrimLeft(p.f2.pad(p.f2.formatFloat(s.im))+"j", " ")
	if im[0] == '+' || im[0] == '-' {
		return re + im
	}
	return re + "+" + im
}

func (p *printer) tensor(t *Tensor, indent int) string {
	switch len(t.shape()) {
	case 0:
		return p.value(scalarAt(t, 0))
	case 1:
		return p.vector(t, indent)
	}
	var parts []string
	n := t.shape()[0]
	for k, i := range shownIndices(n, p.summarize) {
		if p.summarize && n > 2*printEdgeItems && k == printEdgeItems {
			parts = append(parts, "...")
		}
		s, _ := t.Select(0, i)
		parts = append(parts, p.tensor(s, indent+1))
	}
	sep := "," + strings.Repeat("\n", len(t.shape())-1) + strings.Repeat(" ", indent+1)
	return "[" + strings.Join(parts, sep) + "]"
}

func (p *printer) vector(t *Tensor, indent int) string {
	elemLen := p.f1.width + 2
	if p.f2 != nil {
		elemLen += p.f2.width + 1
	}
	perLine := max(1, (printLineWidth-indent)/elemLen)
	n := t.shape()[0]
	var data []string
	for k, i := range shownIndices(n, p.summarize) {
		if p.summarize && n > 2*printEdgeItems && k == printEdgeItems {
			data = append(data, " ...")
		}
		data = append(data, p.value(scalarAt(t, i)))
	}
	var lines []string
	for i := 0; i < len(data); i += perLine {
		lines = append(lines, strings.Join(data[i:min(i+perLine, len(data))], ", "))
	}
	return "[" + strings.Join(lines, ",\n"+strings.Repeat(" ", indent+1)) + "]"
}
