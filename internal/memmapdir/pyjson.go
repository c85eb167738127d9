package memmapdir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"

	"github.com/tdmpi/tdmpi/internal/jsonesc"
)

// This file writes JSON the way Python's standard json.dumps does with its
// default arguments, which is how tensordict writes meta.json when orjson is
// not installed: ", " between items, ": " after keys, non-ASCII characters
// escaped as \uXXXX (ensure_ascii), no HTML escaping, floats in repr form
// (1.0, 1e-05, 1e+16).

// appendPyString appends s as a JSON string literal escaped like Python's
// json.dumps with ensure_ascii=True. Invalid UTF-8 bytes are written as
// U+FFFD, as encoding/json does.
func appendPyString(b []byte, s string) []byte { return jsonesc.AppendString(b, s, true) }

// appendPyFloat appends f as Python's float repr: the shortest round-trip
// digits, in positional notation with a trailing ".0" for whole numbers, or in
// exponent notation (1e-05, 1.5e+16) when the decimal exponent is below -4 or
// at least 16. NaN and the infinities are written NaN, Infinity and
// -Infinity, as json.dumps does by default.
func appendPyFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	// 'e' with precision -1 gives d.ddde±XX with the shortest digits.
	e := strconv.AppendFloat(nil, f, 'e', -1, bits)
	mant, exp := e, 0
	if k := bytes.IndexByte(e, 'e'); k >= 0 {
		mant = e[:k]
		exp, _ = strconv.Atoi(string(e[k+1:]))
	}
	neg := mant[0] == '-'
	if neg {
		mant = mant[1:]
	}
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if neg {
		b = append(b, '-')
	}
	if exp < -4 || exp >= 16 {
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if exp < 0 {
			b = append(b, '-')
			exp = -exp
		} else {
			b = append(b, '+')
		}
		if exp < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, int64(exp), 10)
	}
	if exp < 0 {
		b = append(b, '0', '.')
		for i := 0; i < -exp-1; i++ {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	intLen := exp + 1
	for len(digits) < intLen {
		digits = append(digits, '0')
	}
	b = append(b, digits[:intLen]...)
	b = append(b, '.')
	if len(digits) == intLen {
		return append(b, '0')
	}
	return append(b, digits[intLen:]...)
}

// MarshalPython returns v as JSON formatted like Python's json.dumps. It
// handles nil, bool, strings, integers, floats, slices, arrays, maps with
// string keys (written in sorted key order, Go maps having none) and
// json.RawMessage (re-spaced); any other value goes through encoding/json
// and is re-spaced.
func MarshalPython(v any) ([]byte, error) {
	return appendPython(nil, reflect.ValueOf(v), 0)
}

// maxDepth bounds the nesting MarshalPython and Respace follow.
const maxDepth = 1000

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func appendPython(b []byte, v reflect.Value, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("memmap: MarshalPython: nesting deeper than %d", maxDepth)
	}
	if !v.IsValid() {
		return append(b, "null"...), nil
	}
	if v.Type() == rawMessageType {
		return respace(b, v.Bytes())
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendPython(b, v.Elem(), depth+1)
	case reflect.Bool:
		if v.Bool() {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case reflect.String:
		if v.Type() == reflect.TypeFor[json.Number]() {
			return append(b, v.String()...), nil
		}
		return appendPyString(b, v.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case reflect.Float32:
		return appendPyFloat(b, v.Float(), 32), nil
	case reflect.Float64:
		return appendPyFloat(b, v.Float(), 64), nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		var err error
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b = append(b, ", "...)
			}
			if b, err = appendPython(b, v.Index(i), depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			break
		}
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		b = append(b, '{')
		var err error
		for i, k := range keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPyString(b, k.String())
			b = append(b, ": "...)
			if b, err = appendPython(b, v.MapIndex(k), depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, fmt.Errorf("memmap: MarshalPython: %w", err)
	}
	return respace(b, raw)
}

// Respace returns the JSON text raw re-formatted the way Python's json.dumps
// writes it (see MarshalPython), keeping every number literal and the order
// of object members as they are.
func Respace(raw []byte) ([]byte, error) { return respace(nil, raw) }

func respace(b []byte, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	out, err := respaceValue(b, dec, 0)
	if err != nil {
		return nil, fmt.Errorf("memmap: reformatting JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("memmap: reformatting JSON: trailing data after value")
	}
	return out, nil
}

func respaceValue(b []byte, dec *json.Decoder, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		open, close := byte(t), byte(']')
		if open == '{' {
			close = '}'
		}
		b = append(b, open)
		for i := 0; dec.More(); i++ {
			if i > 0 {
				b = append(b, ", "...)
			}
			if open == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				b = appendPyString(b, k.(string))
				b = append(b, ": "...)
			}
			if b, err = respaceValue(b, dec, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return append(b, close), nil
	case string:
		return appendPyString(b, t), nil
	case json.Number:
		return append(b, t...), nil
	case bool:
		if t {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case nil:
		return append(b, "null"...), nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}
