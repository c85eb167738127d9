package tensordict

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// encodeMetadata writes the consolidated metadata tree of p as JSON, with
// Python tensordict's field order: cls, non_tensors, leaves, cls_metadata,
// then one child node per nested TensorDict, in insertion order.
func encodeMetadata(p *plan) ([]byte, error) { return p.appendMetadata(nil) }

// appendMetadata appends the metadata of p to dst (allocating, when dst
// has too little room, a buffer sized for the tree).
func (p *plan) appendMetadata(dst []byte) ([]byte, error) {
	if n := 64 + 160*len(p.nodes) + 64*len(p.leaves); cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	b, _, err := p.appendNode(dst, 0)
	return b, err
}

// appendNode appends the metadata of node ni and its subtree, and returns
// the index of the node after the subtree.
func (p *plan) appendNode(b []byte, ni int) ([]byte, int, error) {
	n := &p.nodes[ni]
	td := n.td
	b = append(b, `{"cls":"TensorDict","non_tensors":{`...)
	first := true
	for i := range td.entries {
		e := &td.entries[i]
		if e.kind != kindNonTensor {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, e.name)
		b = append(b, ":["...)
		var err error
		if b, err = appendValue(b, e.v, 0); err != nil {
			return nil, 0, fmt.Errorf("tensordict: metadata: non-tensor %q: %w", e.name, err)
		}
		b = append(b, ',')
		b = appendInts(b, td.batch)
		b = append(b, ",null]"...)
	}
	b = append(b, `},"leaves":{`...)
	li, ci := n.leaf0, ni+1
	first = true
	for i := range td.entries {
		switch td.entries[i].kind {
		case kindTensor:
			l := &p.leaves[li]
			li++
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendLeaf(b, l)
		case kindTD:
			li += p.nodes[ci].leaves
			ci += p.nodes[ci].nodes
		}
	}
	b = append(b, `},"cls_metadata":{"device":null,"names":[`...)
	for i := range td.batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "null"...)
	}
	b = append(b, `],"batch_size":`...)
	b = appendInts(b, td.batch)
	b = append(b, `,"is_locked":`...)
	b = strconv.AppendBool(b, td.locked)
	b = append(b, '}')
	ci = ni + 1
	for i := range td.entries {
		e := &td.entries[i]
		if e.kind != kindTD {
			continue
		}
		b = append(b, ',')
		b = appendString(b, e.name)
		b = append(b, ':')
		var err error
		if b, ci, err = p.appendNode(b, ci); err != nil {
			return nil, 0, err
		}
	}
	return append(b, '}'), ni + n.nodes, nil
}

// appendLeaf appends "name":[dtype, shape, start, stop, pad].
func appendLeaf(b []byte, l *planLeaf) []byte {
	b = appendString(b, l.name)
	b = append(b, `:["torch.`...)
	b = append(b, l.t.DType().String()...)
	b = append(b, `",[`...)
	for d := range l.t.Dim() {
		if d > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, l.t.Size(d))
	}
	b = append(b, "],"...)
	b = appendInt(b, l.start)
	b = append(b, ',')
	b = appendInt(b, l.start+l.nbytes+l.pad)
	b = append(b, ',')
	b = appendInt(b, l.pad)
	return append(b, ']')
}

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

// appendValue appends a canonical non-tensor value as JSON. Floats always
// carry a fraction or exponent, so that they read back as floats.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxValueDepth)
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
		b = append(b, '{')
		for i, k := range sortedKeys(x) {
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

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD (the
// writers check keys and values before they get here).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
