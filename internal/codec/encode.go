package codec

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tdmpi/tdmpi/internal/jsonesc"
	"github.com/tdmpi/tdmpi/tensor"
)

// The metadata writer (see "Writing metadata" in the package doc): plain
// functions of the buffer, not methods of a writer object, so that the hot
// loop over leaves keeps the buffer in registers.

// MetadataSize is a generous estimate of the metadata of a tree of nodes
// nodes and leaves leaves, for sizing a buffer once.
func MetadataSize(nodes, leaves int) int { return 64 + 160*nodes + 64*leaves }

// AppendNodeStart opens a node and its non_tensors.
func AppendNodeStart(b []byte) []byte {
	return append(b, `{"cls":"TensorDict","non_tensors":{`...)
}

// sep appends the comma before a member of the object being written,
// unless it is the first.
func sep(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return b
}

// AppendNonTensor appends "name":[value, batch, null], a member of
// non_tensors. The error, if value is not JSON-able, names the value.
func AppendNonTensor(b []byte, name string, value any, batch []int) ([]byte, error) {
	b = appendString(sep(b), name)
	b = append(b, ":["...)
	b, err := AppendValue(b, value)
	if err != nil {
		return nil, fmt.Errorf("non-tensor %q: %w", name, err)
	}
	b = append(b, ',')
	b = appendInts(b, batch)
	return append(b, ",null]"...), nil
}

// AppendLeavesStart closes non_tensors and opens leaves.
func AppendLeavesStart(b []byte) []byte { return append(b, `},"leaves":{`...) }

// dtypeFields holds, for each valid dtype, the text that follows a leaf's
// name up to its shape: `:["torch.float32",`.
var dtypeFields = func() (t [64]string) {
	for d := range tensor.DType(len(t)) {
		if d.Valid() {
			t[d] = `:["torch.` + d.String() + `",`
		}
	}
	return t
}()

// AppendLeaf appends "name":["torch.<dtype>", shape, start, stop, pad], a
// member of leaves, with t's dtype and shape.
func AppendLeaf(b []byte, name string, t *tensor.Tensor, start, stop, pad int) []byte {
	b = appendString(sep(b), name)
	if dt := t.DType(); int(dt) < len(dtypeFields) && dtypeFields[dt] != "" {
		b = append(b, dtypeFields[dt]...)
	} else {
		b = append(b, `:["torch.`...)
		b = append(b, dt.String()...)
		b = append(b, `",`...)
	}
	b = append(b, '[')
	for d := range t.Dim() {
		if d > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, t.Size(d))
	}
	b = append(b, "],"...)
	b = appendInt(b, start)
	b = append(b, ',')
	b = appendInt(b, stop)
	b = append(b, ',')
	b = appendInt(b, pad)
	return append(b, ']')
}

// AppendNodeMetadata closes leaves and appends cls_metadata.
func AppendNodeMetadata(b []byte, batch []int, locked bool) []byte {
	b = append(b, `},"cls_metadata":{"device":null,"names":[`...)
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
	return append(b, '}')
}

// AppendChild starts the member of the nested TensorDict name; its node
// follows.
func AppendChild(b []byte, name string) []byte {
	b = appendString(append(b, ','), name)
	return append(b, ':')
}

// AppendStackStart opens a NonTensorStack node (the member of its parent,
// after AppendChild) and its non_tensors. The writer of a stack of shape
// [n, rest...] appends, for each index i below n, "i" as AppendNonTensor
// with batch rest when the values of element i are all equal, then
// AppendStackMetadata, then for each other i AppendChild("i") and the
// element's stack, and finally AppendNodeEnd: Python tensordict's layout of
// a NonTensorStack stacked along dimension 0.
func AppendStackStart(b []byte) []byte {
	return append(b, `{"cls":"NonTensorStack","non_tensors":{`...)
}

// AppendStackMetadata closes the non_tensors of a NonTensorStack node and
// appends its empty leaves and its cls_metadata (stack_dim 0).
func AppendStackMetadata(b []byte) []byte {
	return append(b, `},"leaves":{},"cls_metadata":{"stack_dim":0,"stack_dim_name":null,"is_locked":false}`...)
}

// AppendNodeEnd closes a node.
func AppendNodeEnd(b []byte) []byte { return append(b, '}') }

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
