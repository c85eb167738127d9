package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/tensor"
)

// The oracle is a second, independent reader of consolidated metadata,
// built on a library's JSON tokenizer (encoding/json's Decoder.Token;
// jsontext's too, with GOEXPERIMENT=jsonv2): it decodes into the same Node
// descriptor and applies the rules of the format as the package doc states
// them, without sharing any code with the hand reader (json.go, decode.go)
// but the descriptor types. Tests compare the two: the same descriptor, or
// both an error (the texts are not compared).

// tokenizer is what the oracle reads JSON with: a library's tokenizer
// behind a small adapter (encoding/json's here; jsontext's in
// jsontext_test.go, built with GOEXPERIMENT=jsonv2).
type tokenizer interface {
	// next returns the next token: its kind ('{', '}', '[', ']', '"' with
	// the decoded string as text, '0' with the number's literal as text,
	// 't', 'f' or 'n').
	next() (kind byte, text string, err error)
	// more reports whether another member or element follows in the
	// current object or array.
	more() bool
	// end returns nil if nothing but white space follows the value.
	end() error
}

// stdTokenizer is encoding/json's Decoder.Token.
type stdTokenizer struct{ dec *json.Decoder }

func newStdTokenizer(meta []byte) *stdTokenizer {
	dec := json.NewDecoder(bytes.NewReader(meta))
	dec.UseNumber()
	return &stdTokenizer{dec}
}

func (z *stdTokenizer) next() (byte, string, error) {
	t, err := z.dec.Token()
	if err != nil {
		return 0, "", err
	}
	switch x := t.(type) {
	case json.Delim:
		return byte(x), "", nil
	case string:
		return '"', x, nil
	case json.Number:
		return '0', string(x), nil
	case bool:
		if x {
			return 't', "", nil
		}
		return 'f', "", nil
	}
	return 'n', "", nil
}

func (z *stdTokenizer) more() bool { return z.dec.More() }

func (z *stdTokenizer) end() error {
	if _, err := z.dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data: %v: %w", err, errOracle)
	}
	return nil
}

// oracleDecode decodes meta as Decode does, with encoding/json.
func oracleDecode(meta []byte, stLen int, lim Limits) (*Node, string, error) {
	// encoding/json replaces invalid UTF-8 in strings; the format refuses
	// it (and outside strings it is a syntax error anyway).
	if !utf8.Valid(meta) {
		return nil, "", errors.New("invalid UTF-8")
	}
	return decodeWith(newStdTokenizer(meta), meta, stLen, lim)
}

// decodeWith decodes meta, read by tz, as Decode does.
func decodeWith(tz tokenizer, meta []byte, stLen int, lim Limits) (*Node, string, error) {
	if len(meta) > lim.MaxMetadataBytes {
		return nil, "", errors.New("too long")
	}
	o := &oracle{tz: tz, lim: lim, stLen: stLen}
	root, err := o.node(nil, "", true)
	if err != nil {
		return nil, "", err
	}
	if err := tz.end(); err != nil {
		return nil, "", err
	}
	if err := o.overlap(root); err != nil {
		return nil, "", err
	}
	return root, o.class, nil
}

type oracle struct {
	tz      tokenizer
	lim     Limits
	stLen   int
	depth   int
	entries int
	class   string
	stacks  map[*Node]*Stack // the NonTensorStack nodes read, and their values
}

var errOracle = errors.New("oracle: refused")

// token reads the next token, keeping track of the depth.
func (o *oracle) token() (byte, string, error) {
	k, text, err := o.tz.next()
	if err != nil {
		return 0, "", err
	}
	switch k {
	case '{', '[':
		o.depth++
		if o.depth > o.lim.MaxDepth {
			return 0, "", fmt.Errorf("too deep: %w", errOracle)
		}
	case '}', ']':
		o.depth--
	}
	return k, text, nil
}

func (o *oracle) open(want byte) error {
	k, _, err := o.token()
	if err != nil {
		return err
	}
	if k != want {
		return fmt.Errorf("want %c, got %c: %w", want, k, errOracle)
	}
	return nil
}

// close consumes the end of the current container.
func (o *oracle) close() error {
	_, _, err := o.token()
	return err
}

// value reads any value into the canonical form.
func (o *oracle) value() (any, error) {
	k, text, err := o.token()
	if err != nil {
		return nil, err
	}
	switch k {
	case '[':
		s := []any{}
		for o.tz.more() {
			v, err := o.value()
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, o.close()
	case '{':
		m := map[string]any{}
		for o.tz.more() {
			k, err := o.str()
			if err != nil {
				return nil, err
			}
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("duplicate %q: %w", k, errOracle)
			}
			if m[k], err = o.value(); err != nil {
				return nil, err
			}
		}
		return m, o.close()
	case '0':
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s: %w", text, errOracle)
		}
		return f, nil
	case '"':
		return text, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected %c: %w", k, errOracle)
}

func (o *oracle) str() (string, error) {
	k, text, err := o.token()
	if err != nil {
		return "", err
	}
	if k != '"' {
		return "", fmt.Errorf("want a string, got %c: %w", k, errOracle)
	}
	return text, nil
}

// nullOrString reads null or a string.
func (o *oracle) nullOrString() error {
	k, _, err := o.token()
	if err != nil {
		return err
	}
	if k != '"' && k != 'n' {
		return fmt.Errorf("want null or a string, got %c: %w", k, errOracle)
	}
	return nil
}

// integer reads a JSON integer (no fraction, no exponent) that fits an int.
func (o *oracle) integer() (int, error) {
	k, text, err := o.token()
	if err != nil {
		return 0, err
	}
	if k != '0' || strings.ContainsAny(text, ".eE") {
		return 0, fmt.Errorf("want an integer, got %c %s: %w", k, text, errOracle)
	}
	v, err := strconv.ParseInt(text, 10, strconv.IntSize)
	if err != nil {
		return 0, fmt.Errorf("integer %s: %w", text, errOracle)
	}
	return int(v), nil
}

// ints reads an array of non-negative integers.
func (o *oracle) ints() ([]int, error) {
	if err := o.open('['); err != nil {
		return nil, err
	}
	s := []int{}
	for o.tz.more() {
		v, err := o.integer()
		if err != nil {
			return nil, err
		}
		if v < 0 {
			return nil, fmt.Errorf("negative %d: %w", v, errOracle)
		}
		s = append(s, v)
	}
	return s, o.close()
}

func (o *oracle) count() error {
	if o.entries++; o.entries > o.lim.MaxEntries {
		return fmt.Errorf("too many entries: %w", errOracle)
	}
	return nil
}

// node reads one TensorDict node.
func (o *oracle) node(parent *Node, name string, top bool) (*Node, error) {
	n := &Node{Parent: parent, Name: name}
	if parent != nil {
		n.Level = parent.Level + 1
	}
	if err := o.open('{'); err != nil {
		return nil, err
	}
	var sawCls, sawCM, sawBatch, isStack bool
	names, stackDim := -1, 0
	for o.tz.more() {
		key, err := o.str()
		if err != nil {
			return nil, err
		}
		switch {
		case key == "cls":
			s, err := o.str()
			if err != nil {
				return nil, err
			}
			switch {
			case s == "NonTensorStack" && !top:
				isStack = true
			case s != "TensorDict":
				return nil, fmt.Errorf("class %q: %w", s, errOracle)
			}
			sawCls = true
		case key == "non_tensors":
			if err := o.nonTensors(n); err != nil {
				return nil, err
			}
		case key == "leaves":
			if err := o.leaves(n); err != nil {
				return nil, err
			}
		case key == "cls_metadata":
			sawCM = true
			if names, sawBatch, stackDim, err = o.clsMetadata(n); err != nil {
				return nil, err
			}
		case key == "size",
			top && (key == "_total_bytes" || key == "_storage_device" || key == "_max_bytes"):
			if _, err := o.value(); err != nil {
				return nil, err
			}
		case top && key == "_tensorclass_type":
			v, err := o.value()
			if err != nil {
				return nil, err
			}
			switch s := v.(type) {
			case nil:
			case string:
				o.class = s
			default:
				return nil, fmt.Errorf("class name %v: %w", v, errOracle)
			}
		default:
			if err := o.count(); err != nil {
				return nil, err
			}
			c, err := o.node(n, key, false)
			if err != nil {
				return nil, err
			}
			if st := o.stacks[c]; st != nil {
				n.NonTensors = append(n.NonTensors, NonTensor{Name: key, Batch: st.Shape, Stack: st})
				continue
			}
			n.Children = append(n.Children, Child{Name: key, Node: c})
		}
	}
	if err := o.close(); err != nil {
		return nil, err
	}
	if !sawCls || !sawCM {
		return nil, fmt.Errorf("no cls or cls_metadata: %w", errOracle)
	}
	if isStack {
		st, err := o.stack(n, stackDim)
		if err != nil {
			return nil, err
		}
		if o.stacks == nil {
			o.stacks = map[*Node]*Stack{}
		}
		o.stacks[n] = st
		return n, nil
	}
	if !sawBatch {
		return nil, fmt.Errorf("no batch_size: %w", errOracle)
	}
	for _, nt := range n.NonTensors {
		if nt.Stack != nil && !slices.Equal(nt.Stack.Shape, n.Batch) {
			return nil, fmt.Errorf("stack shape: %w", errOracle)
		}
	}
	if names >= 0 && names != len(n.Batch) {
		return nil, fmt.Errorf("names: %w", errOracle)
	}
	for i := range n.Leaves {
		if err := o.checkLeaf(n, &n.Leaves[i]); err != nil {
			return nil, err
		}
	}
	n.SubNodes, n.SubEntries, n.SubDims = 1, len(n.NonTensors)+len(n.Leaves)+len(n.Children), len(n.Batch)
	for _, c := range n.Children {
		if len(c.Node.Batch) < len(n.Batch) || !slices.Equal(c.Node.Batch[:len(n.Batch)], n.Batch) {
			return nil, fmt.Errorf("child batch: %w", errOracle)
		}
		n.SubNodes += c.Node.SubNodes
		n.SubEntries += c.Node.SubEntries
		n.SubDims += c.Node.SubDims
	}
	return n, nil
}

func (o *oracle) nonTensors(n *Node) error {
	if err := o.open('{'); err != nil {
		return err
	}
	for o.tz.more() {
		name, err := o.str()
		if err != nil {
			return err
		}
		if err := o.count(); err != nil {
			return err
		}
		if err := o.open('['); err != nil {
			return err
		}
		var v any
		var batch []int
		for i := 0; o.tz.more(); i++ {
			switch i {
			case 0:
				v, err = o.value()
			case 1:
				batch, err = o.ints()
			case 2:
				err = o.nullOrString()
			default:
				err = fmt.Errorf("more than 3 fields: %w", errOracle)
			}
			if err != nil {
				return err
			}
		}
		if err := o.close(); err != nil {
			return err
		}
		n.NonTensors = append(n.NonTensors, NonTensor{Name: name, Value: v, Batch: batch})
	}
	return o.close()
}

func (o *oracle) leaves(n *Node) error {
	if err := o.open('{'); err != nil {
		return err
	}
	for o.tz.more() {
		name, err := o.str()
		if err != nil {
			return err
		}
		if err := o.count(); err != nil {
			return err
		}
		if err := o.open('['); err != nil {
			return err
		}
		l := Leaf{Name: name, Node: n}
		i := 0
		for ; o.tz.more(); i++ {
			switch i {
			case 0:
				var s string
				if s, err = o.str(); err == nil {
					if l.DType, err = tensor.ParseDType(s); err != nil {
						err = fmt.Errorf("dtype %q: %w", s, errOracle)
					}
				}
			case 1:
				l.Shape, err = o.ints()
			case 2:
				l.Start, err = o.integer()
			case 3:
				l.Stop, err = o.integer()
			case 4:
				l.Pad, err = o.integer()
			default:
				err = fmt.Errorf("more than 5 fields: %w", errOracle)
			}
			if err != nil {
				return err
			}
		}
		if err := o.close(); err != nil {
			return err
		}
		if i != 5 {
			return fmt.Errorf("%d fields: %w", i, errOracle)
		}
		n.Leaves = append(n.Leaves, l)
	}
	return o.close()
}

// clsMetadata reads cls_metadata and returns the number of names (-1 for
// none), whether it has a batch size and its stack_dim.
func (o *oracle) clsMetadata(n *Node) (names int, sawBatch bool, stackDim int, err error) {
	if err := o.open('{'); err != nil {
		return 0, false, 0, err
	}
	names = -1
	fail := func(err error) (int, bool, int, error) { return 0, false, 0, err }
	for o.tz.more() {
		key, err := o.str()
		if err != nil {
			return fail(err)
		}
		switch key {
		case "device":
			err = o.nullOrString()
		case "names":
			var v any
			if v, err = o.value(); err != nil {
				return fail(err)
			}
			switch s := v.(type) {
			case nil:
			case []any:
				names = len(s)
				for _, e := range s {
					if _, ok := e.(string); !ok && e != nil {
						return fail(fmt.Errorf("name %v: %w", e, errOracle))
					}
				}
			default:
				return fail(fmt.Errorf("names %v: %w", v, errOracle))
			}
		case "batch_size":
			n.Batch, err = o.ints()
			sawBatch = true
		case "stack_dim":
			stackDim, err = o.integer()
		case "is_locked":
			var k byte
			if k, _, err = o.token(); err == nil {
				if k != 't' && k != 'f' {
					err = fmt.Errorf("is_locked %c: %w", k, errOracle)
				}
				n.Locked = k == 't'
			}
		default:
			_, err = o.value()
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := o.close(); err != nil {
		return fail(err)
	}
	return names, sawBatch, stackDim, nil
}

// stack checks NonTensorStack node n and returns its values, each found
// from its multi-index: the index along stackDim picks the element, the
// others index into it.
func (o *oracle) stack(n *Node, stackDim int) (*Stack, error) {
	k := len(n.NonTensors)
	if len(n.Leaves) > 0 || len(n.Children) > 0 || k == 0 {
		return nil, fmt.Errorf("stack content: %w", errOracle)
	}
	byName := map[string]*NonTensor{}
	for i := range n.NonTensors {
		byName[n.NonTensors[i].Name] = &n.NonTensors[i]
	}
	items := make([]*NonTensor, k)
	for i := range items {
		if items[i] = byName[fmt.Sprint(i)]; items[i] == nil {
			return nil, fmt.Errorf("stack element %d: %w", i, errOracle)
		}
		if !slices.Equal(items[i].Batch, items[0].Batch) {
			return nil, fmt.Errorf("stack element batch: %w", errOracle)
		}
	}
	eb := items[0].Batch
	if stackDim < 0 || stackDim > len(eb) {
		return nil, fmt.Errorf("stack_dim: %w", errOracle)
	}
	shape := append(append(append([]int{}, eb[:stackDim]...), k), eb[stackDim:]...)
	total := 1
	for _, d := range shape {
		if d != 0 && total > math.MaxInt/d {
			return nil, fmt.Errorf("stack size: %w", errOracle)
		}
		total *= d
	}
	if o.entries+total > o.lim.MaxEntries {
		return nil, fmt.Errorf("too many entries: %w", errOracle)
	}
	o.entries += total
	st := &Stack{Shape: shape, Values: make([]any, total)}
	idx := make([]int, len(shape))
	for flat := range total {
		rem := flat
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d], rem = rem%shape[d], rem/shape[d]
		}
		it := items[idx[stackDim]]
		j := 0 // the element's own row-major index
		for d, i := range idx {
			if d != stackDim {
				j = j*shape[d] + i
			}
		}
		if it.Stack != nil {
			st.Values[flat] = it.Stack.Values[j]
		} else {
			st.Values[flat] = it.Value
		}
	}
	return st, nil
}

func (o *oracle) checkLeaf(n *Node, l *Leaf) error {
	if len(l.Shape) < len(n.Batch) || !slices.Equal(l.Shape[:len(n.Batch)], n.Batch) {
		return fmt.Errorf("shape vs batch: %w", errOracle)
	}
	numel := 1
	for _, d := range l.Shape {
		if d != 0 && numel > math.MaxInt/d {
			return fmt.Errorf("overflow: %w", errOracle)
		}
		numel *= d
	}
	size := l.DType.Size()
	if numel > math.MaxInt/size {
		return fmt.Errorf("overflow: %w", errOracle)
	}
	l.NBytes = numel * size
	if l.Pad < 0 || l.Pad >= 8 || l.Start < 0 || l.Stop < l.Start || l.Stop-l.Start != l.NBytes+l.Pad || l.Stop > o.stLen {
		return fmt.Errorf("range: %w", errOracle)
	}
	return nil
}

// overlap refuses non-empty leaves whose byte ranges overlap, and sets
// every child's first offset.
func (o *oracle) overlap(root *Node) error {
	var all []*Leaf
	var walk func(n *Node) int
	walk = func(n *Node) int {
		first := -1
		for i := range n.Leaves {
			all = append(all, &n.Leaves[i])
			if first < 0 || n.Leaves[i].Start < first {
				first = n.Leaves[i].Start
			}
		}
		for i := range n.Children {
			c := &n.Children[i]
			c.First = walk(c.Node)
			if c.First >= 0 && (first < 0 || c.First < first) {
				first = c.First
			}
		}
		return first
	}
	walk(root)
	slices.SortStableFunc(all, func(a, b *Leaf) int { return a.Start - b.Start })
	end := -1
	for _, l := range all {
		if l.Start == l.Stop {
			continue
		}
		if l.Start < end {
			return fmt.Errorf("overlap: %w", errOracle)
		}
		end = max(end, l.Stop)
	}
	return nil
}

// dump writes everything a decoded tree says, for comparing two.
func dump(n *Node, class string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "class=%q\n", class)
	var walk func(n *Node, indent string)
	walk = func(n *Node, indent string) {
		fmt.Fprintf(&b, "%sbatch=%v locked=%v level=%d path=%v sub=%d/%d/%d\n", indent, n.Batch, n.Locked, n.Level, n.Path(), n.SubNodes, n.SubEntries, n.SubDims)
		for _, nt := range n.NonTensors {
			fmt.Fprintf(&b, "%s nt %q = %#v batch %v\n", indent, nt.Name, nt.Value, nt.Batch)
			if nt.Stack != nil {
				fmt.Fprintf(&b, "%s  stack %v: %#v\n", indent, nt.Stack.Shape, nt.Stack.Values)
			}
		}
		for _, l := range n.Leaves {
			fmt.Fprintf(&b, "%s leaf %q %v%v [%d,%d) pad %d nbytes %d in %v\n", indent, l.Name, l.DType, l.Shape, l.Start, l.Stop, l.Pad, l.NBytes, l.Node.Path())
		}
		for _, c := range n.Children {
			fmt.Fprintf(&b, "%s child %q first %d:\n", indent, c.Name, c.First)
			walk(c.Node, indent+"  ")
		}
	}
	walk(n, "")
	return b.String()
}
