// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Default limits of Decode.
const (
	DefaultMaxPickle = 256 << 20 // bytes of one pickle
	DefaultMaxDepth  = 1100      // container nesting: a TensorDict of 1000 levels and its leaves fit
	DefaultMaxNodes  = 1 << 22   // values in the decoded tree
)

// Limits bound what Decode accepts; a zero field takes its default.
type Limits struct {
	MaxPickle int // length of the pickle in bytes
	MaxDepth  int // nesting of containers in the result
	MaxNodes  int // values in the result, a shared value counted at each place
}

// Resolve returns l with its zero fields set to their defaults.
func (l Limits) Resolve() Limits {
	if l.MaxPickle <= 0 {
		l.MaxPickle = DefaultMaxPickle
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	return l
}

// Decode decodes a pickle of builtins (protocol 2 to 5, as Python's
// pickle.dumps writes it) into *Dict, *List, *Tuple, string, int64,
// float64, bool and nil values.
//
// It is meant for pickles from peers and refuses, with an *OpcodeError
// naming it, every opcode that names, calls or builds an object (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT1, ...) and
// every opcode Python's pickler does not write for such values (bytes, sets,
// the text forms of protocol 0, POP, DUP, ...). Dict keys must be str,
// strings valid UTF-8, integers within int64. Every length and memo index is
// checked against the input before anything is allocated, so the decoded
// tree is never larger than a small multiple of the input; nesting depth and
// node count are bounded by lim. A container cannot be changed once it is
// inside another one (Python's pickler never does that), which keeps cycles
// out of the result.
func Decode(p []byte, lim Limits) (any, error) {
	lim = lim.Resolve()
	if len(p) > lim.MaxPickle {
		return nil, limitErr(0, "pickle of %d bytes, limit %d", len(p), lim.MaxPickle)
	}
	d := decoder{p: p, lim: lim, memo: make(map[uint32]any)}
	return d.run()
}

type decoder struct {
	p     []byte
	pos   int // offset of the next byte
	op    int // offset of the current opcode
	lim   Limits
	stack []any
	marks []int // stack heights at each MARK
	memo  map[uint32]any
}

// take returns the next n bytes of the argument of the current opcode.
func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.p)-d.pos {
		return nil, pickleErr(d.op, "%s needs %d bytes, %d left", OpName(d.p[d.op]), n, len(d.p)-d.pos)
	}
	b := d.p[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) u8() (int, error) {
	b, err := d.take(1)
	if err != nil {
		return 0, err
	}
	return int(b[0]), nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (d *decoder) push(v any) { d.stack = append(d.stack, v) }

// pop removes the top value, which must not be a MARK.
func (d *decoder) pop() (any, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1] == n) {
		return nil, pickleErr(d.op, "%s on an empty stack", OpName(d.p[d.op]))
	}
	v := d.stack[n-1]
	d.stack = d.stack[:n-1]
	return v, nil
}

// popMark removes and returns the values above the last MARK.
func (d *decoder) popMark() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, pickleErr(d.op, "%s without MARK", OpName(d.p[d.op]))
	}
	h := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[h:len(d.stack):len(d.stack)]
	d.stack = d.stack[:h]
	return items, nil
}

// top returns the value under the items of a SETITEM(S) or APPEND(S), at
// stack height h.
func (d *decoder) target(h int) (any, error) {
	base := 0
	if len(d.marks) > 0 {
		base = d.marks[len(d.marks)-1]
	}
	if h <= base {
		return nil, pickleErr(d.op, "%s has no container under its items", OpName(d.p[d.op]))
	}
	return d.stack[h-1], nil
}

// shapeOf returns the bookkeeping of a container, nil for a scalar.
func shapeOf(v any) *shape {
	switch x := v.(type) {
	case *Dict:
		return &x.shape
	case *List:
		return &x.shape
	case *Tuple:
		return &x.shape
	}
	return nil
}

// adopt accounts for child being put into the container whose shape is s:
// it seals child and grows s, checking the limits.
func (d *decoder) adopt(s *shape, child any) error {
	depth, size := 0, 1
	if cs := shapeOf(child); cs != nil {
		if cs == s {
			return pickleErr(d.op, "a container put into itself")
		}
		cs.sealed = true
		depth, size = cs.depth, cs.size
	}
	s.depth = max(s.depth, depth+1)
	s.size += size
	switch {
	case s.depth > d.lim.MaxDepth:
		return limitErr(d.op, "containers nested deeper than %d", d.lim.MaxDepth)
	case s.size > d.lim.MaxNodes:
		return limitErr(d.op, "more than %d values", d.lim.MaxNodes)
	}
	return nil
}

// modify returns the shape of container v for a change, refusing a sealed one.
func (d *decoder) modify(v any) (*shape, error) {
	s := shapeOf(v)
	if s.sealed {
		return nil, pickleErr(d.op, "%s changes a container that is already inside another one", OpName(d.p[d.op]))
	}
	return s, nil
}

func (d *decoder) setItems(items []any) error {
	if len(items)%2 != 0 {
		return pickleErr(d.op, "%s with an odd number of items", OpName(d.p[d.op]))
	}
	t, err := d.target(len(d.stack))
	if err != nil {
		return err
	}
	dict, ok := t.(*Dict)
	if !ok {
		return pickleErr(d.op, "%s on a %s, want a dict", OpName(d.p[d.op]), typeName(t))
	}
	s, err := d.modify(dict)
	if err != nil {
		return err
	}
	for i := 0; i < len(items); i += 2 {
		k, ok := items[i].(string)
		if !ok {
			return pickleErr(d.op, "dict key of type %s, only str keys are allowed", typeName(items[i]))
		}
		if _, present := dict.Get(k); !present {
			s.size++ // the key
		}
		if err := d.adopt(s, items[i+1]); err != nil {
			return err
		}
		dict.Set(k, items[i+1])
	}
	return nil
}

func (d *decoder) appendItems(items []any) error {
	t, err := d.target(len(d.stack))
	if err != nil {
		return err
	}
	list, ok := t.(*List)
	if !ok {
		return pickleErr(d.op, "%s on a %s, want a list", OpName(d.p[d.op]), typeName(t))
	}
	s, err := d.modify(list)
	if err != nil {
		return err
	}
	for _, v := range items {
		if err := d.adopt(s, v); err != nil {
			return err
		}
	}
	list.Items = append(list.Items, items...)
	return nil
}

func (d *decoder) tuple(items []any) error {
	t := &Tuple{Items: append([]any(nil), items...), shape: shape{size: 1}}
	for _, v := range items {
		if err := d.adopt(&t.shape, v); err != nil {
			return err
		}
	}
	d.push(t)
	return nil
}

func (d *decoder) str(n uint64) error {
	if n > uint64(len(d.p)-d.pos) {
		return pickleErr(d.op, "%s of %d bytes, %d left", OpName(d.p[d.op]), n, len(d.p)-d.pos)
	}
	b, _ := d.take(int(n))
	if !utf8.Valid(b) {
		return pickleErr(d.op, "string is not valid UTF-8")
	}
	d.push(string(b))
	return nil
}

func (d *decoder) get(i uint32) error {
	v, ok := d.memo[i]
	if !ok {
		return pickleErr(d.op, "%s of memo index %d, which was never stored", OpName(d.p[d.op]), i)
	}
	d.push(v)
	return nil
}

func (d *decoder) put(i uint32) error {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1] == n) {
		return pickleErr(d.op, "%s with nothing to store", OpName(d.p[d.op]))
	}
	d.memo[i] = d.stack[n-1]
	return nil
}

// long1 decodes n little-endian two's-complement bytes.
func (d *decoder) long1() error {
	n, err := d.u8()
	if err != nil {
		return err
	}
	b, err := d.take(n)
	if err != nil {
		return err
	}
	if n > 8 {
		return pickleErr(d.op, "LONG1 of %d bytes does not fit int64", n)
	}
	var v int64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | int64(b[i])
	}
	if n > 0 && n < 8 && b[n-1]&0x80 != 0 {
		v -= 1 << (8 * n)
	}
	d.push(v)
	return nil
}

func (d *decoder) run() (any, error) {
	if len(d.p) < 2 || d.p[0] != opProto {
		return nil, pickleErr(0, "no PROTO opcode at the start (tensordict pickles with protocol 4 or 5)")
	}
	for d.pos < len(d.p) {
		d.op = d.pos
		op := d.p[d.pos]
		d.pos++
		var err error
		switch op {
		case opProto:
			var v int
			if v, err = d.u8(); err == nil && (d.op != 0 || v < 2 || v > 5) {
				err = pickleErr(d.op, "PROTO %d: want one PROTO 2 to 5, first", v)
			}
		case opFrame:
			var n uint64
			if n, err = d.u64(); err == nil && n > uint64(len(d.p)-d.pos) {
				err = pickleErr(d.op, "FRAME of %d bytes, %d left", n, len(d.p)-d.pos)
			}
		case opStop:
			return d.stop()
		case opMark:
			d.marks = append(d.marks, len(d.stack))
		case opEmptyDict:
			d.push(&Dict{shape: shape{size: 1}})
		case opEmptyList:
			d.push(&List{shape: shape{size: 1}})
		case opEmptyTuple:
			d.push(&Tuple{shape: shape{size: 1}})
		case opSetItem:
			if len(d.stack) < 2 || (len(d.marks) > 0 && d.marks[len(d.marks)-1] > len(d.stack)-2) {
				err = pickleErr(d.op, "SETITEM needs a key and a value")
				break
			}
			items := d.stack[len(d.stack)-2:]
			d.stack = d.stack[:len(d.stack)-2]
			err = d.setItems(items)
		case opSetItems:
			var items []any
			if items, err = d.popMark(); err == nil {
				err = d.setItems(items)
			}
		case opAppend:
			var v any
			if v, err = d.pop(); err == nil {
				err = d.appendItems([]any{v})
			}
		case opAppends:
			var items []any
			if items, err = d.popMark(); err == nil {
				err = d.appendItems(items)
			}
		case opTuple:
			var items []any
			if items, err = d.popMark(); err == nil {
				err = d.tuple(items)
			}
		case opTuple1, opTuple2, opTuple3:
			n := int(op-opTuple1) + 1
			h := len(d.stack) - n
			if h < 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1] > h) {
				err = pickleErr(d.op, "%s needs %d values", OpName(op), n)
				break
			}
			items := d.stack[h:]
			d.stack = d.stack[:h]
			err = d.tuple(items)
		case opMemoize:
			err = d.put(uint32(len(d.memo)))
		case opBinPut:
			var i int
			if i, err = d.u8(); err == nil {
				err = d.put(uint32(i))
			}
		case opLongBinPut:
			var i uint32
			if i, err = d.u32(); err == nil {
				err = d.put(i)
			}
		case opBinGet:
			var i int
			if i, err = d.u8(); err == nil {
				err = d.get(uint32(i))
			}
		case opLongBinGet:
			var i uint32
			if i, err = d.u32(); err == nil {
				err = d.get(i)
			}
		case opShortBinUnicode:
			var n int
			if n, err = d.u8(); err == nil {
				err = d.str(uint64(n))
			}
		case opBinUnicode:
			var n uint32
			if n, err = d.u32(); err == nil {
				err = d.str(uint64(n))
			}
		case opBinUnicode8:
			var n uint64
			if n, err = d.u64(); err == nil {
				err = d.str(n)
			}
		case opBinInt:
			var v uint32
			if v, err = d.u32(); err == nil {
				d.push(int64(int32(v)))
			}
		case opBinInt1:
			var v int
			if v, err = d.u8(); err == nil {
				d.push(int64(v))
			}
		case opBinInt2:
			var b []byte
			if b, err = d.take(2); err == nil {
				d.push(int64(binary.LittleEndian.Uint16(b)))
			}
		case opLong1:
			err = d.long1()
		case opBinFloat:
			var b []byte
			if b, err = d.take(8); err == nil {
				d.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case opNone:
			d.push(nil)
		case opNewTrue:
			d.push(true)
		case opNewFalse:
			d.push(false)
		default:
			err = &OpcodeError{Op: op, Pos: d.op}
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, pickleErr(len(d.p), "no STOP opcode")
}

// stop ends the pickle: one value on the stack, no open MARK, no byte after.
func (d *decoder) stop() (any, error) {
	switch {
	case len(d.marks) != 0:
		return nil, pickleErr(d.op, "STOP with %d MARKs still open", len(d.marks))
	case len(d.stack) != 1:
		return nil, pickleErr(d.op, "STOP with %d values on the stack, want 1", len(d.stack))
	case d.pos != len(d.p):
		return nil, pickleErr(d.pos, "%d bytes after STOP", len(d.p)-d.pos)
	}
	return d.stack[0], nil
}

// typeName names the Python type of a decoded value, for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *Dict:
		return "dict"
	case *List, []any:
		return "list"
	case *Tuple:
		return "tuple"
	}
	return "unknown"
}
