package tensordict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/internal/bytesize"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/tensor"
)

// stringValues is the number of leading elements String shows of each
// tensor leaf (tdmpi inspect's default as well).
const stringValues = 6

// maxValueRunes bounds the width of a non-tensor value in the tree.
const maxValueRunes = 60

// TreeOptions tells WriteTree what to print. The zero value prints the
// title "TensorDict" and no tensor elements.
type TreeOptions struct {
	// Title starts the summary line; empty means "TensorDict". tdmpi
	// inspect puts the path and format of the file there.
	Title string
	// Values is the number of leading elements, in row-major order, that
	// the VALUES column shows of each tensor leaf; 0 or less shows none.
	Values int
}

// String formats td as a tree, as WriteTree does with the first 6 elements
// of each tensor leaf, without the final newline. fmt.Print of a
// TensorDict prints this; PythonRepr is Python tensordict's repr instead.
func (td *TensorDict) String() string {
	if td == nil {
		return "<nil>"
	}
	var b strings.Builder
	_ = td.WriteTree(&b, TreeOptions{Values: stringValues}) // a strings.Builder does not fail
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteTree writes td to w as a summary line and a table of its entries, in
// insertion order, nested TensorDicts below their entry with their
// branches drawn. This is what fmt.Print of a TensorDict and tdmpi inspect
// print:
//
//	TensorDict, batch size [2 1], 2 tensor leaves, 20 B
//	KEY           TYPE        SHAPE  BYTES  VALUES
//	nested        TensorDict  [2 1]
//	├── int64     int64       [2 1]  16 B   [1 2]
//	├── string    non-tensor                "a string!"
//	└── bfloat16  bfloat16    [2 1]  4 B    [1 1]
//
// The summary line gives opts.Title, the tensorclass name if td has one,
// the batch size, and the number and bytes of the tensor leaves at every
// level. The table has one row per entry: tensor leaves with their dtype,
// shape, bytes and leading elements (see TreeOptions.Values; elements are
// formatted as tensor.Tensor's String formats them, "<released>" for a
// released storage), nested TensorDicts with their batch size (and
// tensorclass name), and non-tensor values as compact JSON, cut to 60
// characters. The VALUES column is left out when it would be empty. Keys
// that would not print safely in a column (empty, or with spaces, quotes,
// control or unprintable characters) are quoted as Go strings. A
// TensorDict with no entries prints "(no entries)" in place of the table.
// WriteTree returns the first error of w.
func (td *TensorDict) WriteTree(w io.Writer, opts TreeOptions) error {
	if td == nil {
		return ErrNil
	}
	title := opts.Title
	if title == "" {
		title = "TensorDict"
	}
	if c := td.ClassName(); c != "" {
		title += ", tensorclass " + c
	}
	leaves, nbytes, nonTensors := treeTotals(td)
	noun := "tensor leaves"
	if leaves == 1 {
		noun = "tensor leaf"
	}
	if _, err := fmt.Fprintf(w, "%s, batch size %v, %d %s, %s\n",
		title, td.BatchSize(), leaves, noun, bytesize.Format(nbytes)); err != nil {
		return err
	}
	items := td.Items()
	if len(items) == 0 {
		_, err := io.WriteString(w, "(no entries)\n")
		return err
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	header := "KEY\tTYPE\tSHAPE\tBYTES"
	if opts.Values > 0 || nonTensors > 0 {
		header += "\tVALUES"
	}
	fmt.Fprintln(tw, header)
	writeTreeRows(tw, items, "", true, opts.Values)
	if err := tw.Flush(); err != nil {
		return err
	}
	// Every row has every cell, so that columns align across nested
	// TensorDicts; the padding of empty trailing cells is dropped.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// treeTotals returns the number of tensor leaves of td at every level,
// their bytes, and the number of non-tensor values at every level.
func treeTotals(td *TensorDict) (leaves int, nbytes int64, nonTensors int) {
	for _, it := range td.Items(IncludeNested()) {
		switch {
		case it.Tensor != nil:
			leaves++
			nbytes += int64(it.Tensor.NBytes())
		case it.IsNonTensor:
			nonTensors++
		}
	}
	return leaves, nbytes, nonTensors
}

// writeTreeRows writes one row per item, and the rows of nested
// TensorDicts below their item. indent is the tree drawing that precedes
// the items' branches; top is true for the root's own items, which have no
// branch. values is TreeOptions.Values.
func writeTreeRows(w io.Writer, items []Item, indent string, top bool, values int) {
	for i, it := range items {
		branch, childIndent := "", ""
		if !top {
			branch, childIndent = "├── ", "│   "
			if i == len(items)-1 {
				branch, childIndent = "└── ", "    "
			}
		}
		key := indent + branch + displayKey(it.Key[len(it.Key)-1])
		switch {
		case it.Tensor != nil:
			t := it.Tensor
			fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", key, t.DType(), t.Shape(),
				bytesize.Format(int64(t.NBytes())), leadingElements(t, values))
		case it.TD != nil:
			typ := "TensorDict"
			if c := it.TD.ClassName(); c != "" {
				typ = c + " (tensorclass)"
			}
			fmt.Fprintf(w, "%s\t%s\t%v\t\t\n", key, typ, it.TD.BatchSize())
			writeTreeRows(w, it.TD.Items(), indent+childIndent, false, values)
		default:
			fmt.Fprintf(w, "%s\tnon-tensor\t\t\t%s\n", key, truncateRunes(compactJSON(it.Value), maxValueRunes))
		}
	}
}

// leadingElements formats the first n elements of t as "[1 2 3 ...]", or
// returns "" when n is 0 or less, "<released>" for a released storage and
// "<fault>" for a mapped file another process truncated.
func leadingElements(t *tensor.Tensor, n int) string {
	if n <= 0 {
		return ""
	}
	if t.Storage().Released() {
		return "<released>"
	}
	var elems []string
	var more bool
	if mem.CatchFault(func() error { elems, more = t.FormatElements(n); return nil }) != nil {
		return "<fault>"
	}
	if more {
		elems = append(elems, "...")
	}
	return "[" + strings.Join(elems, " ") + "]"
}

// compactJSON returns the canonical non-tensor value v as compact JSON,
// without escaping <, > and &.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v) // canonical values always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// displayKey returns k as is when it prints safely in a column, and quoted
// otherwise (empty, with spaces, tabs, control or unprintable characters,
// or quotes).
func displayKey(k string) string {
	if k == "" || strings.ContainsAny(k, "\"\\") {
		return strconv.Quote(k)
	}
	for _, r := range k {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(k)
		}
	}
	return k
}

// truncateRunes shortens s to at most n runes, ending it with "..." when it
// was cut. It also replaces tabs and newlines, which would break the
// table's columns.
func truncateRunes(s string, n int) string {
	s = strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// PythonRepr describes td the way Python tensordict's repr does, for people
// comparing output with Python's; String (what fmt prints) is the Go form.
// For example
//
//	TensorDict(
//	    fields={
//	        c: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False)},
//	    batch_size=torch.Size([2]),
//	    device=None,
//	    is_shared=False)
//
// Fields are sorted by name; nested TensorDicts print the same way,
// indented, and non-tensor values as NonTensorData(data=..., ...).
func (td *TensorDict) PythonRepr() string {
	if td == nil {
		return "<nil>"
	}
	var b strings.Builder
	td.writeRepr(&b, "")
	return b.String()
}

// torchSize formats a shape as torch.Size([2, 3]).
func torchSize(s []int) string {
	var b strings.Builder
	b.WriteString("torch.Size([")
	for i, d := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteString("])")
	return b.String()
}

func (td *TensorDict) writeRepr(b *strings.Builder, ind string) {
	in1 := ind + "    "
	in2 := in1 + "    "
	order := make([]int, len(td.entries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(td.entries[x].name, td.entries[y].name) })
	b.WriteString("TensorDict(\n")
	b.WriteString(in1 + "fields={")
	for n, i := range order {
		e := &td.entries[i]
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n" + in2 + e.name + ": ")
		switch e.kind {
		case kindTensor:
			fmt.Fprintf(b, "Tensor(shape=%s, device=cpu, dtype=%s, is_shared=False)", torchSize(e.t.Shape()), e.t.DType().TorchName())
		case kindTD:
			e.td.writeRepr(b, in2)
		case kindNonTensor:
			if st, ok := e.v.(*NonTensorStack); ok {
				b.WriteString(st.PythonRepr())
				break
			}
			fmt.Fprintf(b, "NonTensorData(data=%s, batch_size=%s, device=None)", pyValue(e.v), torchSize(td.batch))
		}
	}
	b.WriteString("},\n")
	b.WriteString(in1 + "batch_size=" + torchSize(td.batch) + ",\n")
	b.WriteString(in1 + "device=None,\n")
	b.WriteString(in1 + "is_shared=False)")
}

// pyValue prints a canonical non-tensor value as Python's str would.
func pyValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		parts := make([]string, 0, len(x))
		for _, k := range sortedKeys(x) {
			parts = append(parts, pyRepr(k)+": "+pyRepr(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIn") {
			s += ".0"
		}
		return s
	}
	return fmt.Sprint(v)
}

// pyRepr is pyValue with strings quoted, as inside Python containers.
func pyRepr(v any) string {
	if s, ok := v.(string); ok {
		return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
	}
	return pyValue(v)
}
