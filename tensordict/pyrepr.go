package tensordict

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

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
				b.WriteString(st.String())
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
