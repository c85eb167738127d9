package tensordict

// This file is the metadata code as it was before the fast paths of
// metafast: a reference that the differential tests compare the new code
// with, byte for byte and error for error.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/tensor"
)

// refReservedNames are metadata fields of a consolidated node (and the transport
// extras Python adds at the top). A nested TensorDict with one of these names
// would be mistaken for them, so Layout refuses it.
var refReservedNames = map[string]bool{
	"cls": true, "non_tensors": true, "leaves": true, "cls_metadata": true,
	"_total_bytes": true, "_tensorclass_type": true, "_storage_device": true,
	"_max_bytes": true, "size": true,
}

// refPlanLeaf is one tensor leaf placed in the consolidated storage.
type refPlanLeaf struct {
	name   string
	t      *tensor.Tensor
	start  int // byte offset of the first element
	nbytes int // numel * itemsize
	pad    int // zero bytes after the data, so the next leaf is 8-aligned
}

// refPlanChild is a nested TensorDict of a refPlanNode.
type refPlanChild struct {
	name string
	node *refPlanNode
}

// refPlanNode is the consolidation refPlan of one TensorDict level.
type refPlanNode struct {
	td       *TensorDict
	leaves   []refPlanLeaf
	children []refPlanChild
}

// refPlan is a whole consolidation refPlan: the tree and its leaves in packing
// order (depth first, insertion order).
type refPlan struct {
	root  *refPlanNode
	flat  []*refPlanLeaf
	total int
}

// refPadTo8 returns the zero bytes that follow n bytes of data.
func refPadTo8(n int) int { return (8 - n%8) % 8 }

// refMakePlan lays out td's leaves from byte offset base. With useOffsets, each
// leaf's start is its current offset in its storage (for a TensorDict that
// is already consolidated) instead of the running offset.
func refMakePlan(op string, td *TensorDict, base int, useOffsets bool) (*refPlan, error) {
	p := &refPlan{total: base}
	root, err := p.node(op, nil, td, 0, useOffsets)
	if err != nil {
		return nil, err
	}
	p.root = root
	return p, nil
}

// refMaxPlanDepth bounds the nesting of TensorDicts Layout accepts, matching the
// default metadata depth limit of FromConsolidated.
const refMaxPlanDepth = defaultMaxDepth - 8

func (p *refPlan) node(op string, prefix Key, td *TensorDict, depth int, useOffsets bool) (*refPlanNode, error) {
	if depth > refMaxPlanDepth {
		return nil, fmt.Errorf("tensordict: %s: key %v: nested deeper than %d levels", op, prefix, refMaxPlanDepth)
	}
	n := &refPlanNode{td: td}
	for i := range td.entries {
		e := &td.entries[i]
		if !utf8.ValidString(e.name) {
			return nil, fmt.Errorf("tensordict: %s: key %v is not valid UTF-8", op, prefix.child(e.name))
		}
		switch e.kind {
		case kindTensor:
			nb := e.t.NBytes()
			if e.t.Storage().Released() {
				return nil, fmt.Errorf("tensordict: %s: key %v: storage was released", op, prefix.child(e.name))
			}
			start := p.total
			if e.t.DType() == tensor.Complex128 && start%16 != 0 {
				start += 8 // torch views complex128 at multiples of 16 only
			}
			if useOffsets {
				start = e.t.Offset()
			}
			pad := refPadTo8(nb)
			n.leaves = append(n.leaves, refPlanLeaf{name: e.name, t: e.t, start: start, nbytes: nb, pad: pad})
			p.total = start + nb + pad
		case kindTD:
			if refReservedNames[e.name] {
				return nil, fmt.Errorf("tensordict: %s: nested tensordict %v has a name reserved by the consolidated metadata", op, prefix.child(e.name))
			}
			c, err := p.node(op, prefix.child(e.name), e.td, depth+1, useOffsets)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, refPlanChild{name: e.name, node: c})
		}
	}
	return n, nil
}

// flatten returns the refPlan's leaves in storage order.
func (p *refPlan) flatten() []*refPlanLeaf {
	if p.flat != nil {
		return p.flat
	}
	var walk func(n *refPlanNode)
	walk = func(n *refPlanNode) {
		li, ci := 0, 0
		for i := range n.td.entries {
			switch n.td.entries[i].kind {
			case kindTensor:
				p.flat = append(p.flat, &n.leaves[li])
				li++
			case kindTD:
				walk(n.children[ci].node)
				ci++
			}
		}
	}
	walk(p.root)
	return p.flat
}

// refEncodeMetadata writes the consolidated metadata tree of p as JSON, with
// Python tensordict's field order: cls, non_tensors, leaves, cls_metadata,
// then one child node per nested TensorDict, in insertion order.
func refEncodeMetadata(p *refPlan) ([]byte, error) {
	buf := make([]byte, 0, 256+96*len(p.flatten()))
	return refAppendNode(buf, p.root)
}

func refAppendNode(b []byte, n *refPlanNode) ([]byte, error) {
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
		b = refAppendString(b, e.name)
		b = append(b, ":["...)
		var err error
		if b, err = refAppendValue(b, e.v, 0); err != nil {
			return nil, fmt.Errorf("tensordict: metadata: non-tensor %q: %w", e.name, err)
		}
		b = append(b, ',')
		b = refAppendInts(b, td.batch)
		b = append(b, ",null]"...)
	}
	b = append(b, `},"leaves":{`...)
	for i := range n.leaves {
		l := &n.leaves[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = refAppendString(b, l.name)
		b = append(b, `:["`...)
		b = append(b, l.t.DType().TorchName()...)
		b = append(b, `",`...)
		b = refAppendInts(b, l.t.Shape())
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(l.start), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(l.start+l.nbytes+l.pad), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(l.pad), 10)
		b = append(b, ']')
	}
	b = append(b, `},"cls_metadata":{"device":null,"names":[`...)
	for i := range td.batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "null"...)
	}
	b = append(b, `],"batch_size":`...)
	b = refAppendInts(b, td.batch)
	b = append(b, `,"is_locked":`...)
	b = strconv.AppendBool(b, td.locked)
	b = append(b, '}')
	for _, c := range n.children {
		b = append(b, ',')
		b = refAppendString(b, c.name)
		b = append(b, ':')
		var err error
		if b, err = refAppendNode(b, c.node); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// refAppendInts appends s as a JSON array.
func refAppendInts(b []byte, s []int) []byte {
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, ']')
}

// refAppendValue appends a canonical non-tensor value as JSON. Floats always
// carry a fraction or exponent, so that they read back as floats.
func refAppendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return refAppendString(b, x), nil
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
			if b, err = refAppendValue(b, e, depth+1); err != nil {
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
			b = refAppendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = refAppendValue(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("value of type %T is not JSON-able", v)
}

const refHexDigits = "0123456789abcdef"

// refAppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD (the
// writers check keys and values before they get here).
func refAppendString(b []byte, s string) []byte {
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
				b = append(b, '\\', 'u', '0', '0', refHexDigits[c>>4], refHexDigits[c&0xf])
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

// refJsonParser is a small strict JSON reader for untrusted metadata. It reads
// objects member by member, in document order, so the metadata's key order
// survives, and it bounds nesting depth. It never panics on any input.
type refJsonParser struct {
	data     []byte
	pos      int
	depth    int
	maxDepth int
}

var errRefEOF = errors.New("unexpected end of JSON")

func (p *refJsonParser) errf(format string, args ...any) error {
	return fmt.Errorf("JSON offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *refJsonParser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it.
func (p *refJsonParser) peek() (byte, error) {
	p.ws()
	if p.pos >= len(p.data) {
		return 0, fmt.Errorf("JSON offset %d: %w", p.pos, errRefEOF)
	}
	return p.data[p.pos], nil
}

func (p *refJsonParser) expect(c byte) error {
	got, err := p.peek()
	if err != nil {
		return err
	}
	if got != c {
		return p.errf("want %q, found %q", c, got)
	}
	p.pos++
	return nil
}

func (p *refJsonParser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.errf("nesting deeper than %d", p.maxDepth)
	}
	return nil
}

// object reads an object, calling member for each key with the parser
// positioned at the value, which member must consume.
func (p *refJsonParser) object(member func(key string) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if err := p.enter(); err != nil {
		return err
	}
	c, err := p.peek()
	if err != nil {
		return err
	}
	if c == '}' {
		p.pos++
		p.depth--
		return nil
	}
	for {
		key, err := p.str()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		c, err := p.peek()
		if err != nil {
			return err
		}
		p.pos++
		switch c {
		case ',':
			continue
		case '}':
			p.depth--
			return nil
		default:
			p.pos--
			return p.errf("want ',' or '}', found %q", c)
		}
	}
}

// array reads an array, calling elem with the parser positioned at each
// element, which elem must consume.
func (p *refJsonParser) array(elem func(i int) error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if err := p.enter(); err != nil {
		return err
	}
	c, err := p.peek()
	if err != nil {
		return err
	}
	if c == ']' {
		p.pos++
		p.depth--
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		c, err := p.peek()
		if err != nil {
			return err
		}
		p.pos++
		switch c {
		case ',':
			continue
		case ']':
			p.depth--
			return nil
		default:
			p.pos--
			return p.errf("want ',' or ']', found %q", c)
		}
	}
}

// str reads a string.
func (p *refJsonParser) str() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := p.data[start:p.pos]
			p.pos++
			if !utf8.Valid(s) {
				return "", p.errf("string is not valid UTF-8")
			}
			return string(s), nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return "", p.errf("control character in string")
		}
		p.pos++
	}
	return "", fmt.Errorf("JSON offset %d: %w", p.pos, errRefEOF)
}

// strEscaped finishes a string that holds escapes, from its first byte start.
func (p *refJsonParser) strEscaped(start int) (string, error) {
	out := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(out) {
				return "", p.errf("string is not valid UTF-8")
			}
			return string(out), nil
		case c < 0x20:
			return "", p.errf("control character in string")
		case c != '\\':
			out = append(out, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.data) {
			break
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok = p.hex4(); !ok {
						return "", p.errf("bad \\u escape")
					}
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError && r2 >= 0 && !utf16.IsSurrogate(r2) {
					out = utf8.AppendRune(out, utf8.RuneError)
					r = r2
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.errf("bad escape \\%c", e)
		}
	}
	return "", fmt.Errorf("JSON offset %d: %w", p.pos, errRefEOF)
}

func (p *refJsonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.pos += 4
	return r, true
}

// number reads a JSON number's text and reports whether it is an integer (no
// fraction or exponent).
func (p *refJsonParser) number() (text []byte, isInt bool, err error) {
	p.ws()
	start := p.pos
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '0' {
		i++
	} else if digits() == 0 {
		return nil, false, p.errf("invalid number")
	}
	isInt = true
	if i < len(d) && d[i] == '.' {
		i++
		isInt = false
		if digits() == 0 {
			return nil, false, p.errf("invalid number")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		isInt = false
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, false, p.errf("invalid number")
		}
	}
	p.pos = i
	return d[start:i], isInt, nil
}

// integer reads a JSON integer that fits an int.
func (p *refJsonParser) integer() (int, error) {
	text, isInt, err := p.number()
	if err != nil {
		return 0, err
	}
	if !isInt {
		return 0, p.errf("want an integer, found %s", text)
	}
	v, err := strconv.ParseInt(string(text), 10, strconv.IntSize)
	if err != nil {
		return 0, p.errf("integer %s out of range", text)
	}
	return int(v), nil
}

// ints reads an array of non-negative integers.
func (p *refJsonParser) ints(what string) ([]int, error) {
	out := make([]int, 0, 4)
	err := p.array(func(int) error {
		v, err := p.integer()
		if err != nil {
			return err
		}
		if v < 0 {
			return p.errf("%s has negative entry %d", what, v)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// literal consumes the literal word.
func (p *refJsonParser) literal(word string) error {
	p.ws()
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.errf("invalid literal")
	}
	p.pos += len(word)
	return nil
}

// null consumes a null if one is next and reports whether it did.
func (p *refJsonParser) null() bool {
	c, err := p.peek()
	if err != nil || c != 'n' {
		return false
	}
	return p.literal("null") == nil
}

// boolean reads true or false.
func (p *refJsonParser) boolean() (bool, error) {
	c, err := p.peek()
	if err != nil {
		return false, err
	}
	if c == 't' {
		return true, p.literal("true")
	}
	return false, p.literal("false")
}

// value reads any JSON value into the canonical non-tensor form: nil, bool,
// string, int64 (integers that fit), float64, []any, map[string]any.
func (p *refJsonParser) value() (any, error) {
	c, err := p.peek()
	if err != nil {
		return nil, err
	}
	switch {
	case c == '{':
		m := map[string]any{}
		err := p.object(func(k string) error {
			if _, dup := m[k]; dup {
				return p.errf("duplicate key %q", k)
			}
			v, err := p.value()
			m[k] = v
			return err
		})
		return m, err
	case c == '[':
		s := []any{}
		err := p.array(func(int) error {
			v, err := p.value()
			s = append(s, v)
			return err
		})
		return s, err
	case c == '"':
		return p.str()
	case c == 't' || c == 'f':
		return p.boolean()
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		text, isInt, err := p.number()
		if err != nil {
			return nil, err
		}
		if isInt {
			if v, err := strconv.ParseInt(string(text), 10, 64); err == nil {
				return v, nil
			}
		}
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, p.errf("number %s out of range", text)
		}
		return f, nil
	}
	return nil, p.errf("unexpected %q", c)
}

// skip consumes any JSON value.
func (p *refJsonParser) skip() error {
	_, err := p.value()
	return err
}

// end returns an error if anything but white space is left.
func (p *refJsonParser) end() error {
	p.ws()
	if p.pos != len(p.data) {
		return p.errf("trailing data after the JSON value")
	}
	return nil
}

// refTopLevelExtras are the transport fields Python tensordict adds at the top
// of the metadata; the reader skips them.
var refTopLevelExtras = map[string]bool{
	"_total_bytes": true, "_storage_device": true, "_max_bytes": true, "_tensorclass_type": true,
}

// refLeafMeta is one decoded leaf: [dtype, shape, start, stop, pad].
type refLeafMeta struct {
	name             string
	dt               tensor.DType
	shape            []int
	start, stop, pad int
	nbytes           int
	path             Key // the node's key, for messages
}

type refNtMeta struct {
	name string
	v    any
}

type refChildMeta struct {
	name  string
	node  *refMetaNode
	first int // smallest leaf start in the subtree, -1 if it has no leaf
}

// refMetaNode is one decoded metadata level.
type refMetaNode struct {
	path     Key
	batch    []int
	names    int // length of names, -1 if absent or null
	locked   bool
	sawCls   bool
	sawCM    bool
	nts      []refNtMeta
	leaves   []refLeafMeta
	children []refChildMeta
}

// refMetaDecoder reads a metadata tree.
type refMetaDecoder struct {
	p       refJsonParser
	cfg     readConfig
	entries int
	class   string
	stLen   int
}

// refDecodeMetadata parses and validates meta against a storage of stLen bytes.
func refDecodeMetadata(meta []byte, stLen int, cfg readConfig) (*refMetaNode, string, error) {
	if len(meta) > cfg.maxMetaBytes {
		return nil, "", fmt.Errorf("metadata is %d bytes, limit %d", len(meta), cfg.maxMetaBytes)
	}
	d := &refMetaDecoder{p: refJsonParser{data: meta, maxDepth: cfg.maxDepth}, cfg: cfg, stLen: stLen}
	root, err := d.node(nil, true)
	if err != nil {
		return nil, "", err
	}
	if err := d.p.end(); err != nil {
		return nil, "", err
	}
	if err := refCheckOverlap(root); err != nil {
		return nil, "", err
	}
	return root, d.class, nil
}

func (d *refMetaDecoder) count(path Key, name string) error {
	d.entries++
	if d.entries > d.cfg.maxEntries {
		return fmt.Errorf("key %v: more than %d entries", path.child(name), d.cfg.maxEntries)
	}
	return nil
}

// node reads one metadata level at key path.
func (d *refMetaDecoder) node(path Key, top bool) (*refMetaNode, error) {
	p := &d.p
	n := &refMetaNode{path: path, names: -1}
	where := func() string {
		if len(path) == 0 {
			return "root"
		}
		return "key " + path.String()
	}
	err := p.object(func(key string) error {
		switch {
		case key == "cls":
			s, err := p.str()
			if err != nil {
				return err
			}
			if s != "TensorDict" {
				return fmt.Errorf("%s: class %q is not supported (only TensorDict)", where(), s)
			}
			n.sawCls = true
			return nil
		case key == "non_tensors":
			return p.object(func(name string) error {
				if err := d.count(path, name); err != nil {
					return err
				}
				v, err := d.nonTensor(path.child(name))
				if err != nil {
					return err
				}
				n.nts = append(n.nts, refNtMeta{name: name, v: v})
				return nil
			})
		case key == "leaves":
			return p.object(func(name string) error {
				if err := d.count(path, name); err != nil {
					return err
				}
				l, err := d.leaf(path, name)
				if err != nil {
					return err
				}
				n.leaves = append(n.leaves, l)
				return nil
			})
		case key == "cls_metadata":
			n.sawCM = true
			return d.clsMetadata(n, where)
		case key == "size" || (top && refTopLevelExtras[key]):
			if key == "_tensorclass_type" && !p.null() {
				s, err := p.str()
				if err != nil {
					return fmt.Errorf("_tensorclass_type: %w", err)
				}
				d.class = s
				return nil
			}
			return p.skip()
		default:
			if err := d.count(path, key); err != nil {
				return err
			}
			c, err := d.node(path.child(key), false)
			if err != nil {
				return err
			}
			n.children = append(n.children, refChildMeta{name: key, node: c})
			return nil
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where(), err)
	}
	if !n.sawCls {
		return nil, fmt.Errorf("%s: no \"cls\" field", where())
	}
	if !n.sawCM {
		return nil, fmt.Errorf("%s: no \"cls_metadata\" field", where())
	}
	if n.names >= 0 && n.names != len(n.batch) {
		return nil, fmt.Errorf("%s: %d names for batch size %v", where(), n.names, n.batch)
	}
	for i := range n.leaves {
		if err := d.checkLeaf(n, &n.leaves[i]); err != nil {
			return nil, err
		}
	}
	for _, c := range n.children {
		if !hasPrefix(c.node.batch, n.batch) {
			return nil, fmt.Errorf("key %v: batch size %v does not start with parent batch size %v", path.child(c.name), c.node.batch, n.batch)
		}
	}
	return n, nil
}

// nonTensor reads [data, batch_size, device].
func (d *refMetaDecoder) nonTensor(k Key) (any, error) {
	p := &d.p
	var v any
	err := p.array(func(i int) error {
		var err error
		switch i {
		case 0:
			v, err = p.value()
		case 1:
			_, err = p.ints("batch size")
		case 2:
			if !p.null() {
				_, err = p.str()
			}
		default:
			err = fmt.Errorf("more than 3 fields")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("non-tensor %v: %w", k, err)
	}
	return v, nil
}

// leaf reads [dtype, shape, start, stop, pad].
func (d *refMetaDecoder) leaf(path Key, name string) (refLeafMeta, error) {
	p := &d.p
	l := refLeafMeta{name: name, path: path}
	n := 0
	err := p.array(func(i int) error {
		n = i + 1
		var err error
		switch i {
		case 0:
			var s string
			if s, err = p.str(); err != nil {
				return err
			}
			if l.dt, err = tensor.ParseDType(s); err != nil {
				return fmt.Errorf("unsupported dtype %q", s)
			}
		case 1:
			l.shape, err = p.ints("shape")
		case 2:
			l.start, err = p.integer()
		case 3:
			l.stop, err = p.integer()
		case 4:
			l.pad, err = p.integer()
		case 5:
			err = fmt.Errorf("nested (ragged) tensors are not supported")
		default:
			err = fmt.Errorf("more than 5 fields")
		}
		return err
	})
	if err == nil && n != 5 {
		err = fmt.Errorf("%d fields, want [dtype, shape, start, stop, pad]", n)
	}
	if err != nil {
		return l, fmt.Errorf("leaf %v: %w", path.child(name), err)
	}
	return l, nil
}

// clsMetadata reads {"device", "names", "batch_size", "is_locked"}.
func (d *refMetaDecoder) clsMetadata(n *refMetaNode, where func() string) error {
	p := &d.p
	sawBatch := false
	err := p.object(func(key string) error {
		switch key {
		case "device":
			if p.null() {
				return nil
			}
			_, err := p.str()
			return err
		case "names":
			if p.null() {
				return nil
			}
			n.names = 0
			return p.array(func(int) error {
				n.names++
				if p.null() {
					return nil
				}
				_, err := p.str()
				return err
			})
		case "batch_size":
			b, err := p.ints("batch size")
			n.batch, sawBatch = b, true
			return err
		case "is_locked":
			v, err := p.boolean()
			n.locked = v
			return err
		}
		return p.skip()
	})
	if err != nil {
		return fmt.Errorf("cls_metadata: %w", err)
	}
	if !sawBatch {
		return fmt.Errorf("%s: cls_metadata has no batch_size", where())
	}
	return nil
}

// checkLeaf validates a leaf against its node's batch size and the storage.
func (d *refMetaDecoder) checkLeaf(n *refMetaNode, l *refLeafMeta) error {
	k := n.path.child(l.name)
	if !hasPrefix(l.shape, n.batch) {
		return fmt.Errorf("leaf %v: shape %v does not start with batch size %v", k, l.shape, n.batch)
	}
	nb, err := tensor.NBytesOf(l.dt, l.shape)
	if err != nil {
		return fmt.Errorf("leaf %v: %w", k, err)
	}
	l.nbytes = nb
	switch {
	case l.pad < 0 || l.pad >= 8:
		return fmt.Errorf("leaf %v: pad %d is not in [0, 8)", k, l.pad)
	case l.start < 0 || l.stop < l.start:
		return fmt.Errorf("leaf %v: bad byte range [%d, %d)", k, l.start, l.stop)
	case l.stop-l.start != nb+l.pad || nb > l.stop-l.start:
		return fmt.Errorf("leaf %v: byte range [%d, %d) holds %d bytes, %v%v needs %d + pad %d", k, l.start, l.stop, l.stop-l.start, l.dt, l.shape, nb, l.pad)
	case l.stop > d.stLen:
		return fmt.Errorf("leaf %v: byte range [%d, %d) is outside the storage of %d bytes", k, l.start, l.stop, d.stLen)
	}
	return nil
}

// refCheckOverlap refuses leaves whose byte ranges overlap, and sets the first
// offset of every child.
func refCheckOverlap(root *refMetaNode) error {
	var all []*refLeafMeta
	var walk func(n *refMetaNode) int
	walk = func(n *refMetaNode) int {
		first := -1
		for i := range n.leaves {
			l := &n.leaves[i]
			all = append(all, l)
			if first < 0 || l.start < first {
				first = l.start
			}
		}
		for i := range n.children {
			c := &n.children[i]
			c.first = walk(c.node)
			if c.first >= 0 && (first < 0 || c.first < first) {
				first = c.first
			}
		}
		return first
	}
	walk(root)
	slices.SortStableFunc(all, func(a, b *refLeafMeta) int { return cmp.Compare(a.start, b.start) })
	var prev *refLeafMeta
	for _, l := range all {
		if l.stop == l.start {
			continue
		}
		if prev != nil && l.start < prev.stop {
			return fmt.Errorf("leaf %v bytes [%d, %d) overlap leaf %v bytes [%d, %d)",
				l.path.child(l.name), l.start, l.stop, prev.path.child(prev.name), prev.start, prev.stop)
		}
		prev = l
	}
	return nil
}

// refBuildFromMeta makes the TensorDict of a validated metadata node over st.
func refBuildFromMeta(n *refMetaNode, st *tensor.Storage) (*TensorDict, error) {
	size := len(n.nts) + len(n.leaves) + len(n.children)
	td := &TensorDict{batch: n.batch, entries: make([]entry, 0, size)}
	add := func(name string, e entry) error {
		if _, dup := td.lookup(name); dup {
			return fmt.Errorf("key %v: defined twice", n.path.child(name))
		}
		td.add(name, e)
		return nil
	}
	for _, nt := range n.nts {
		if err := add(nt.name, entry{kind: kindNonTensor, v: nt.v}); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(n.leaves, func(a, b refLeafMeta) int { return cmp.Compare(a.start, b.start) })
	slices.SortStableFunc(n.children, func(a, b refChildMeta) int {
		switch {
		case a.first < 0 && b.first < 0:
			return 0
		case a.first < 0:
			return 1
		case b.first < 0:
			return -1
		}
		return cmp.Compare(a.first, b.first)
	})
	first, end := -1, 0
	li, ci := 0, 0
	for li < len(n.leaves) || ci < len(n.children) {
		takeLeaf := ci == len(n.children)
		if !takeLeaf && li < len(n.leaves) {
			c := n.children[ci].first
			takeLeaf = c < 0 || n.leaves[li].start <= c
		}
		if takeLeaf {
			l := &n.leaves[li]
			li++
			t, err := tensor.FromStorage(l.dt, st, l.start, l.shape...)
			if err != nil {
				return nil, fmt.Errorf("leaf %v: %w", n.path.child(l.name), err)
			}
			if err := add(l.name, entry{kind: kindTensor, t: t}); err != nil {
				return nil, err
			}
			if first < 0 {
				first = l.start
			}
			end = max(end, l.stop)
			continue
		}
		c := &n.children[ci]
		ci++
		sub, err := refBuildFromMeta(c.node, st)
		if err != nil {
			return nil, err
		}
		if err := add(c.name, entry{kind: kindTD, td: sub}); err != nil {
			return nil, err
		}
		if sub.cons.end > sub.cons.base {
			if first < 0 {
				first = sub.cons.base
			}
			end = max(end, sub.cons.end)
		}
	}
	if first < 0 {
		first, end = 0, 0
	}
	td.cons = &consState{st: st, base: first, end: end}
	if n.locked {
		td.Lock()
	}
	return td, nil
}

// refStructLeaf is one tensor leaf of a refStructure: what a receiver must agree on
// with a sender before it reuses a buffer.
type refStructLeaf struct {
	key   Key
	dt    tensor.DType
	shape []int
}

// refStructure is a TensorDict's batch size and tensor leaves in storage order.
type refStructure struct {
	batch  []int
	leaves []refStructLeaf
}

func refStructureOf(td *TensorDict) refStructure {
	s := refStructure{batch: td.batch}
	td.walkLeaves(nil, func(k Key, n *TensorDict, j int) error {
		t := n.entries[j].t
		s.leaves = append(s.leaves, refStructLeaf{key: k, dt: t.DType(), shape: t.Shape()})
		return nil
	})
	return s
}

func refStructureOfMeta(meta []byte) (refStructure, error) {
	root, _, err := refDecodeMetadata(meta, math.MaxInt, newReadConfig(nil))
	if err != nil {
		return refStructure{}, err
	}
	type placed struct {
		refStructLeaf
		start int
	}
	var all []placed
	var walk func(n *refMetaNode)
	walk = func(n *refMetaNode) {
		for _, l := range n.leaves {
			all = append(all, placed{refStructLeaf{key: n.path.child(l.name), dt: l.dt, shape: l.shape}, l.start})
		}
		for _, c := range n.children {
			walk(c.node)
		}
	}
	walk(root)
	slices.SortStableFunc(all, func(a, b placed) int { return cmp.Compare(a.start, b.start) })
	s := refStructure{batch: root.batch, leaves: make([]refStructLeaf, len(all))}
	for i, p := range all {
		s.leaves[i] = p.refStructLeaf
	}
	return s, nil
}

func (s refStructure) hash() uint64 {
	h := fnv.New64a()
	var b [8]byte
	num := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	str := func(v string) {
		num(len(v))
		h.Write([]byte(v))
	}
	num(len(s.batch))
	for _, d := range s.batch {
		num(d)
	}
	num(len(s.leaves))
	for _, l := range s.leaves {
		num(len(l.key))
		for _, p := range l.key {
			str(p)
		}
		str(l.dt.TorchName())
		num(len(l.shape))
		for _, d := range l.shape {
			num(d)
		}
	}
	return h.Sum64()
}
