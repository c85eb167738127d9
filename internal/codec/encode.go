package codec

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tdmpi/tdmpi/internal/jsonesc"
	"github.com/tdmpi/tdmpi/tensor"
)

// Writer appends consolidated metadata to B, in Python tensordict's field
// order. It is the one metadata writer: the caller walks its tree and
// calls, for each node,
//
//	BeginNode, NonTensor for each non-tensor value, BeginLeaves,
//	Leaf for each tensor leaf, EndLeaves, then for each nested
//	TensorDict Child and the child's own calls, and finally EndNode
//
// which writes
//
//	{"cls":"TensorDict","non_tensors":{...},"leaves":{...},
//	 "cls_metadata":{"device":null,"names":[null...],"batch_size":[...],"is_locked":false},
//	 "child":{...},...}
//
// A Writer does not allocate when B has room (see Grow).
type Writer struct {
	B     []byte
	first bool // no member yet in the non_tensors or leaves object being written
}

// Grow makes room in B for the metadata of a tree of about nodes nodes
// and leaves leaves (one allocation, when B has too little).
func (w *Writer) Grow(nodes, leaves int) {
	if n := 64 + 160*nodes + 64*leaves; cap(w.B)-len(w.B) < n {
		w.B = append(make([]byte, 0, len(w.B)+n), w.B...)
	}
}

// BeginNode opens a node and its non_tensors.
func (w *Writer) BeginNode() {
	w.B = append(w.B, `{"cls":"TensorDict","non_tensors":{`...)
	w.first = true
}

// NonTensor writes "name":[value, batch, null]. The error, if value is not
// JSON-able, names the value.
func (w *Writer) NonTensor(name string, value any, batch []int) error {
	if !w.first {
		w.B = append(w.B, ',')
	}
	w.first = false
	w.B = appendString(w.B, name)
	w.B = append(w.B, ":["...)
	b, err := AppendValue(w.B, value)
	if err != nil {
		return fmt.Errorf("non-tensor %q: %w", name, err)
	}
	b = append(b, ',')
	b = appendInts(b, batch)
	w.B = append(b, ",null]"...)
	return nil
}

// BeginLeaves closes non_tensors and opens leaves.
func (w *Writer) BeginLeaves() {
	w.B = append(w.B, `},"leaves":{`...)
	w.first = true
}

// Leaf writes "name":["torch.<dtype>", shape, start, stop, pad].
func (w *Writer) Leaf(name string, dt tensor.DType, shape []int, start, stop, pad int) {
	b := w.B
	if !w.first {
		b = append(b, ',')
	}
	w.first = false
	b = appendString(b, name)
	b = append(b, `:["torch.`...)
	b = append(b, dt.String()...)
	b = append(b, `",`...)
	b = appendInts(b, shape)
	b = append(b, ',')
	b = appendInt(b, start)
	b = append(b, ',')
	b = appendInt(b, stop)
	b = append(b, ',')
	b = appendInt(b, pad)
	w.B = append(b, ']')
}

// EndLeaves closes leaves and writes cls_metadata.
func (w *Writer) EndLeaves(batch []int, locked bool) {
	b := append(w.B, `},"cls_metadata":{"device":null,"names":[`...)
	for i := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "null"...)
	}
	b = append(b, `],"batch_size":`...)
	b = appendInts(b, batch)
	b = append(b, `,"is_locked":`...)
	b = strconv.AppendBool(b, locked)
	w.B = append(b, '}')
}

// Child starts the member of the nested TensorDict name; its node follows.
func (w *Writer) Child(name string) {
	w.B = append(w.B, ',')
	w.B = appendString(w.B, name)
	w.B = append(w.B, ':')
}

// EndNode closes a node.
func (w *Writer) EndNode() { w.B = append(w.B, '}') }

// AppendClass appends the top-level member "_tensorclass_type":class to
// meta, a complete metadata object, as Python's consolidated files carry
// the tensorclass name.
func AppendClass(meta []byte, class string) []byte {
	meta = append(meta[:len(meta)-1], `,"_tensorclass_type":`...)
	return append(appendString(meta, class), '}')
}

// appendString appends s as a JSON string, UTF-8 as it is.
func appendString(b []byte, s string) []byte { return jsonesc.AppendString(b, s, false) }

// appendInt appends v in decimal, the common one-digit case without
// strconv.
func appendInt(b []byte, v int) []byte {
	if uint(v) < 10 {
		return append(b, byte('0'+v))
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// appendInts appends s as a JSON array.
func appendInts(b []byte, s []int) []byte {
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, v)
	}
	return append(b, ']')
}

// AppendValue appends v, a non-tensor value in the canonical form (nil,
// bool, string, int64, float64, []any, map[string]any), as JSON: map keys
// sorted, floats always with a fraction or an exponent, so that they read
// back as floats. It refuses NaN, the infinities, other types and nesting
// deeper than MaxValueDepth.
func AppendValue(b []byte, v any) ([]byte, error) { return appendValue(b, v, 0) }

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > MaxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", MaxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendString(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v is not representable in JSON", x)
		}
		n := len(b)
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
		for _, c := range b[n:] {
			if c == '.' || c == 'e' || c == 'E' || c == 'n' || c == 'I' {
				return b, nil
			}
		}
		return append(b, ".0"...), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("value of type %T is not JSON-able", v)
}
