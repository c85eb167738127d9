// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"unicode/utf8"
)

// Protocol is the pickle protocol Encode writes: Python 3.8 to 3.13's
// default, which every Python 3 since 3.4 reads.
const Protocol = 4

// batch is the largest run of items in one SETITEMS or APPENDS, as
// Python's pickler writes them.
const batch = 1000

// Encode pickles v with protocol 4 using only builtin opcodes (no global,
// no call, no memo): *Dict as a dict in its order, []any, *List and []int
// as lists, map[string]any as a dict in key order, *Tuple as a tuple, string, int, int64, float64, bool and nil.
// Any other type, a string that is not valid UTF-8 and nesting deeper than
// DefaultMaxDepth are errors.
func Encode(v any) ([]byte, error) {
	e := encoder{b: append(make([]byte, 0, 256), opProto, Protocol)}
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return append(e.b, opStop), nil
}

type encoder struct{ b []byte }

func (e *encoder) value(v any, depth int) error {
	if depth > DefaultMaxDepth {
		return fmt.Errorf("torchwire: Encode: values nested deeper than %d", DefaultMaxDepth)
	}
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, opNone)
	case bool:
		if x {
			e.b = append(e.b, opNewTrue)
		} else {
			e.b = append(e.b, opNewFalse)
		}
	case int:
		e.int(int64(x))
	case int64:
		e.int(x)
	case float64:
		e.b = append(e.b, opBinFloat)
		e.b = binary.BigEndian.AppendUint64(e.b, math.Float64bits(x))
	case string:
		return e.str(x)
	case *Dict:
		return e.dict(x, depth)
	case map[string]any:
		d := NewDict(len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			d.Set(k, x[k])
		}
		return e.dict(d, depth)
	case []any:
		return e.list(len(x), func(i int) error { return e.value(x[i], depth+1) })
	case *List:
		return e.list(len(x.Items), func(i int) error { return e.value(x.Items[i], depth+1) })
	case []int:
		return e.list(len(x), func(i int) error { e.int(int64(x[i])); return nil })
	case *Tuple:
		e.b = append(e.b, opMark)
		for _, it := range x.Items {
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
		e.b = append(e.b, opTuple)
	default:
		return fmt.Errorf("torchwire: Encode: a value of Go type %T has no builtin pickle form", v)
	}
	return nil
}

// appendOp is the opcode that appends n items: APPEND for 1, else APPENDS.
func appendOp(n int) byte {
	if n == 1 {
		return opAppend
	}
	return opAppends
}

func (e *encoder) int(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		e.b = append(e.b, opBinInt1, byte(v))
	case v >= 0 && v < 1<<16:
		e.b = append(e.b, opBinInt2)
		e.b = binary.LittleEndian.AppendUint16(e.b, uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		e.b = append(e.b, opBinInt)
		e.b = binary.LittleEndian.AppendUint32(e.b, uint32(int32(v)))
	default:
		e.b = append(e.b, opLong1, 8)
		e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v))
	}
}

func (e *encoder) str(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("torchwire: Encode: string %q is not valid UTF-8", s)
	}
	if len(s) < 256 {
		e.b = append(e.b, opShortBinUnicode, byte(len(s)))
	} else {
		if uint64(len(s)) > math.MaxUint32 {
			return fmt.Errorf("torchwire: Encode: string of %d bytes", len(s))
		}
		e.b = append(e.b, opBinUnicode)
		e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(s)))
	}
	e.b = append(e.b, s...)
	return nil
}

func (e *encoder) dict(d *Dict, depth int) error {
	e.b = append(e.b, opEmptyDict)
	for off := 0; off < d.Len(); off += batch {
		end := min(off+batch, d.Len())
		if end-off > 1 {
			e.b = append(e.b, opMark)
		}
		for i := off; i < end; i++ {
			if err := e.str(d.Key(i)); err != nil {
				return err
			}
			if err := e.value(d.Value(i), depth+1); err != nil {
				return fmt.Errorf("%w (under key %q)", err, d.Key(i))
			}
		}
		if end-off > 1 {
			e.b = append(e.b, opSetItems)
		} else {
			e.b = append(e.b, opSetItem)
		}
	}
	return nil
}

// list writes a list of n items, item(i) writing the i-th, in runs of at
// most batch items as Python's pickler does.
func (e *encoder) list(n int, item func(i int) error) error {
	e.b = append(e.b, opEmptyList)
	for off := 0; off < n; off += batch {
		end := min(off+batch, n)
		if end-off > 1 {
			e.b = append(e.b, opMark)
		}
		for i := off; i < end; i++ {
			if err := item(i); err != nil {
				return err
			}
		}
		e.b = append(e.b, appendOp(end-off))
	}
	return nil
}
