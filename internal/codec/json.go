package codec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/internal/wire"
)

// jsonParser is a small strict JSON reader for untrusted metadata. It reads
// objects member by member, in document order, so the metadata's key order
// survives, and it bounds nesting depth. It never panics on any input.
//
// Callers walk containers with openObject/nextMember and openArray/nextElem,
// so that reading the known metadata schema needs no closures. Strings
// without escapes are substrings of src, a single copy of the whole
// document, so reading them does not allocate.
type jsonParser struct {
	data     []byte
	src      string // string(data)
	pos      int
	depth    int
	maxDepth int
}

func newJSONParser(data []byte, maxDepth int) jsonParser {
	return jsonParser{data: data, src: string(data), maxDepth: maxDepth}
}

var errEOF = errors.New("unexpected end of JSON")

func (p *jsonParser) errf(format string, args ...any) error {
	return fmt.Errorf("JSON offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) eof() error { return fmt.Errorf("JSON offset %d: %w", p.pos, errEOF) }

func (p *jsonParser) ws() {
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
func (p *jsonParser) peek() (byte, error) {
	if p.pos < len(p.data) && p.data[p.pos] > ' ' {
		return p.data[p.pos], nil
	}
	p.ws()
	if p.pos >= len(p.data) {
		return 0, p.eof()
	}
	return p.data[p.pos], nil
}

func (p *jsonParser) expect(c byte) error {
	if p.pos < len(p.data) && p.data[p.pos] == c {
		p.pos++
		return nil
	}
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

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return fmt.Errorf("JSON offset %d: nesting deeper than %d: %w", p.pos, p.maxDepth, wire.ErrLimit)
	}
	return nil
}

// open consumes the opening byte of a container and reports whether it has
// any element (false after an immediate closing byte).
func (p *jsonParser) open(c, end byte) (bool, error) {
	if err := p.expect(c); err != nil {
		return false, err
	}
	if err := p.enter(); err != nil {
		return false, err
	}
	got, err := p.peek()
	if err != nil {
		return false, err
	}
	if got == end {
		p.pos++
		p.depth--
		return false, nil
	}
	return true, nil
}

// next consumes the separator after an element of a container closed by
// end and reports whether another element follows.
func (p *jsonParser) next(end byte) (bool, error) {
	if p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ',':
			p.pos++
			return true, nil
		case end:
			p.pos++
			p.depth--
			return false, nil
		}
	}
	c, err := p.peek()
	if err != nil {
		return false, err
	}
	p.pos++
	switch c {
	case ',':
		return true, nil
	case end:
		p.depth--
		return false, nil
	}
	p.pos--
	return false, p.errf("want ',' or '%c', found %q", end, c)
}

// openObject consumes '{' and reports whether a member follows. Read each
// member with key, its value, then nextMember.
func (p *jsonParser) openObject() (bool, error) { return p.open('{', '}') }

// nextMember consumes ',' (true) or the closing '}' (false).
func (p *jsonParser) nextMember() (bool, error) { return p.next('}') }

// key reads a member's key and the ':' after it.
func (p *jsonParser) key() (string, error) {
	k, err := p.str()
	if err != nil {
		return "", err
	}
	return k, p.expect(':')
}

// keyHint is key for a member whose key is likely hint: when the input
// holds exactly "hint": next, it is consumed without scanning. hint must be
// plain printable ASCII without quotes or backslashes.
func (p *jsonParser) keyHint(hint string) (string, error) {
	d, i, n := p.data, p.pos, len(hint)
	if i+n+3 <= len(d) && d[i] == '"' && string(d[i+1:i+1+n]) == hint && d[i+1+n] == '"' && d[i+2+n] == ':' {
		p.pos = i + n + 3
		return hint, nil
	}
	return p.key()
}

// strHint is str for a string that is likely hint (see keyHint).
func (p *jsonParser) strHint(hint string) (string, error) {
	d, i, n := p.data, p.pos, len(hint)
	if i+n+2 <= len(d) && d[i] == '"' && string(d[i+1:i+1+n]) == hint && d[i+1+n] == '"' {
		p.pos = i + n + 2
		return hint, nil
	}
	return p.str()
}

// openArray consumes '[' and reports whether an element follows. Read each
// element, then nextElem.
func (p *jsonParser) openArray() (bool, error) { return p.open('[', ']') }

// nextElem consumes ',' (true) or the closing ']' (false).
func (p *jsonParser) nextElem() (bool, error) { return p.next(']') }

// plainByte marks the bytes a string can hold as they are: printable
// ASCII but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string.
func (p *jsonParser) str() (string, error) {
	// Fast path: a string of plain bytes, with no space before it.
	d := p.data
	if i := p.pos; i < len(d) && d[i] == '"' && len(p.src) == len(d) {
		i++
		start := i
		for i < len(d) && plainByte[d[i]] {
			i++
		}
		if i < len(d) && d[i] == '"' {
			p.pos = i + 1
			return p.src[start:i], nil
		}
	}
	return p.strSlow()
}

// strSlow is str for any string.
func (p *jsonParser) strSlow() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	start := p.pos
	for i := p.pos; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			p.pos = i + 1
			if !utf8.Valid(p.data[start:i]) {
				return "", p.errf("string is not valid UTF-8")
			}
			if len(p.src) == len(p.data) {
				return p.src[start:i], nil
			}
			return string(p.data[start:i]), nil
		}
		if c == '\\' {
			p.pos = i
			return p.strEscaped(start)
		}
		if c < 0x20 {
			p.pos = i
			return "", p.errf("control character in string")
		}
	}
	p.pos = len(p.data)
	return "", p.eof()
}

// strEscaped finishes a string that holds escapes, from its first byte start.
func (p *jsonParser) strEscaped(start int) (string, error) {
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
				// A surrogate pairs only with the escape right after it.
				// When they do not form a pair, the first becomes U+FFFD
				// and the second escape is decoded on its own, as
				// encoding/json does: it may begin a pair of its own.
				r1 := r
				r = utf8.RuneError
				if next := p.pos; next+1 < len(p.data) && p.data[next] == '\\' && p.data[next+1] == 'u' {
					p.pos += 2
					r2, ok := p.hex4()
					if !ok {
						return "", p.errf("bad \\u escape")
					}
					if r = utf16.DecodeRune(r1, r2); r == utf8.RuneError {
						p.pos = next
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.errf("bad escape \\%c", e)
		}
	}
	return "", p.eof()
}

func (p *jsonParser) hex4() (rune, bool) {
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
func (p *jsonParser) number() (text []byte, isInt bool, err error) {
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
func (p *jsonParser) integer() (int, error) {
	// Fast path: up to 18 digits, which cannot overflow an int64, and no sign,
	// fraction, exponent or space.
	d := p.data
	i := p.pos
	if i < len(d) && d[i] >= '1' && d[i] <= '9' && strconv.IntSize == 64 {
		v := 0
		for ; i < len(d) && i-p.pos < 18 && d[i] >= '0' && d[i] <= '9'; i++ {
			v = v*10 + int(d[i]-'0')
		}
		if i == len(d) || (d[i] != '.' && d[i] != 'e' && d[i] != 'E' && (d[i] < '0' || d[i] > '9')) {
			p.pos = i
			return v, nil
		}
	} else if i < len(d) && d[i] == '0' && (i+1 == len(d) || (d[i+1] != '.' && d[i+1] != 'e' && d[i+1] != 'E')) {
		p.pos = i + 1
		return 0, nil
	}
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

// appendInts reads an array of non-negative integers and appends them to
// dst.
func (p *jsonParser) appendInts(dst []int, what string) ([]int, error) {
	more, err := p.openArray()
	for ; more && err == nil; more, err = p.nextElem() {
		var v int
		if v, err = p.integer(); err != nil {
			break
		}
		if v < 0 {
			return dst, p.errf("%s has negative entry %d", what, v)
		}
		dst = append(reserve(dst, 1), v)
	}
	return dst, err
}

// literal consumes the literal word.
func (p *jsonParser) literal(word string) error {
	p.ws()
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.errf("invalid literal")
	}
	p.pos += len(word)
	return nil
}

// null consumes a null if one is next and reports whether it did.
func (p *jsonParser) null() bool {
	c, err := p.peek()
	if err != nil || c != 'n' {
		return false
	}
	return p.literal("null") == nil
}

// boolean reads true or false.
func (p *jsonParser) boolean() (bool, error) {
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
func (p *jsonParser) value() (any, error) {
	c, err := p.peek()
	if err != nil {
		return nil, err
	}
	switch {
	case c == '{':
		m := map[string]any{}
		more, err := p.openObject()
		for ; more && err == nil; more, err = p.nextMember() {
			var k string
			if k, err = p.key(); err != nil {
				break
			}
			if _, dup := m[k]; dup {
				return m, p.errf("duplicate key %q", k)
			}
			var v any
			v, err = p.value()
			m[k] = v
			if err != nil {
				break
			}
		}
		return m, err
	case c == '[':
		s := []any{}
		more, err := p.openArray()
		for ; more && err == nil; more, err = p.nextElem() {
			var v any
			v, err = p.value()
			s = append(s, v)
			if err != nil {
				break
			}
		}
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
func (p *jsonParser) skip() error {
	_, err := p.value()
	return err
}

// end returns an error if anything but white space is left.
func (p *jsonParser) end() error {
	p.ws()
	if p.pos != len(p.data) {
		return p.errf("trailing data after the JSON value")
	}
	return nil
}
