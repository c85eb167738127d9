package tensordict

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// maxValueDepth bounds the nesting of non-tensor values stored by
// SetNonTensor, so that encoding them can never recurse without end.
const maxValueDepth = codec.MaxValueDepth

// canonical returns v converted to the canonical non-tensor form: nil, bool,
// string, int64, float64, []any or map[string]any (recursively), or an error
// naming what is not JSON-able.
func canonical(v any, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("non-tensor value nested deeper than %d levels", maxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool, int64:
		return x, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("non-tensor string %q is not valid UTF-8", x)
		}
		return x, nil
	case int:
		return int64(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("non-tensor value %v is not representable in JSON", x)
		}
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := canonical(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("non-tensor map key %q is not valid UTF-8", k)
			}
			c, err := canonical(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	}
	return canonicalReflect(reflect.ValueOf(v), depth)
}

// canonicalReflect handles the named and typed forms canonical's type switch
// does not list ([]string, map[string]int, type Label string, ...).
func canonicalReflect(rv reflect.Value, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return canonical(rv.String(), depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return float64(u), nil
		}
		return int64(u), nil
	case reflect.Float32, reflect.Float64:
		return canonical(rv.Float(), depth)
	case reflect.Slice:
		if rv.IsNil() {
			return nil, nil
		}
		fallthrough
	case reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			c, err := canonical(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("non-tensor map with %v keys is not JSON-able (keys must be strings)", rv.Type().Key())
		}
		if rv.IsNil() {
			return nil, nil
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			if !utf8.ValidString(it.Key().String()) {
				return nil, fmt.Errorf("non-tensor map key %q is not valid UTF-8", it.Key().String())
			}
			c, err := canonical(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", it.Key().String(), err)
			}
			out[it.Key().String()] = c
		}
		return out, nil
	case reflect.Interface, reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		if rv.Kind() == reflect.Pointer && rv.Type().Elem().Kind() == reflect.Struct {
			break
		}
		return canonical(rv.Elem().Interface(), depth+1)
	}
	if !rv.IsValid() {
		return nil, nil
	}
	return nil, fmt.Errorf("non-tensor value of type %v is not JSON-able (want nil, bool, string, number, or slice or string-keyed map of those)", rv.Type())
}

// equalValues reports whether two canonical non-tensor values are equal.
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case *NonTensorStack:
		y, ok := b.(*NonTensorStack)
		return ok && equalStacks(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	case int64:
		if f, ok := b.(float64); ok {
			return float64(x) == f
		}
	case float64:
		if i, ok := b.(int64); ok {
			return x == float64(i)
		}
	}
	return a == b
}

// cloneValue returns a deep copy of a canonical non-tensor value.
func cloneValue(v any) any {
	switch x := v.(type) {
	case *NonTensorStack:
		return cloneStack(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneValue(e)
		}
		return out
	}
	return v
}

// sortedKeys returns the keys of m in byte order, so that maps encode the
// same way every time.
func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// MaxStackValues bounds the number of values one NonTensorStack holds: it
// is the product of its shape, and a stack keeps one value per element.
// Building a larger one (by Stack, Cat, Expand, or from a file or a peer)
// is an error that matches ErrLimit, so that a batch size alone (which
// costs nothing in a TensorDict without leaves) cannot make tdmpi allocate
// without bound.
const MaxStackValues = 1 << 24

// NonTensorStack is a non-tensor entry whose value differs along the batch:
// one value per element of the batch size of the TensorDict that holds it,
// as Python tensordict's NonTensorStack. Stack, Cat and GatherAndStack of
// TensorDicts whose non-tensor values at a key differ make one, and
// GetNonTensor returns it; indexing, slicing and the other shape operations
// of the TensorDict give back the values of the elements they keep.
//
// A TensorDict never holds a stack whose values are all equal: such a
// value is stored as the single value (Python's NonTensorData), which
// stands for every element. So GetNonTensor returns a *NonTensorStack
// exactly when the elements differ.
//
// A NonTensorStack is immutable; its methods return copies.
type NonTensorStack struct {
	shape  []int
	values []any // row-major, len(values) == product of shape
}

// NewNonTensorStack returns the stack of shape holding values, in row-major
// order (the last dimension varies fastest): len(values) must be the
// product of shape, at most MaxStackValues. Each value must be one
// SetNonTensor accepts (not itself a stack) and is stored in canonical form.
// Store it with SetNonTensor under a TensorDict whose batch size is shape.
func NewNonTensorStack(values []any, shape ...int) (*NonTensorStack, error) {
	n, err := stackLen(shape)
	if err != nil {
		return nil, fmt.Errorf("tensordict: NewNonTensorStack: %w", err)
	}
	if len(values) != n {
		return nil, fmt.Errorf("tensordict: NewNonTensorStack: %d values for shape %v, want %d", len(values), shape, n)
	}
	s := &NonTensorStack{shape: slices.Clone(shape), values: make([]any, n)}
	for i, v := range values {
		if _, ok := v.(*NonTensorStack); ok {
			return nil, fmt.Errorf("tensordict: NewNonTensorStack: value %d is a NonTensorStack (stacks do not nest; give the values of its elements)", i)
		}
		if s.values[i], err = canonical(v, 1); err != nil {
			return nil, fmt.Errorf("tensordict: NewNonTensorStack: value %d: %w", i, err)
		}
	}
	return s, nil
}

// stackLen returns the product of shape, or an error if a dimension is
// negative or the product exceeds MaxStackValues.
func stackLen(shape []int) (int, error) {
	n := 1
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v: dimension %d is negative", shape, i)
		}
		if d != 0 && n > MaxStackValues/d {
			return 0, fmt.Errorf("shape %v has more than %d elements: %w", shape, MaxStackValues, wire.ErrLimit)
		}
		n *= d
	}
	return n, nil
}

// Shape returns a copy of the stack's shape, the batch size of the
// TensorDict that holds it.
func (s *NonTensorStack) Shape() []int { return slices.Clone(s.shape) }

// Len returns the number of values, the product of the shape.
func (s *NonTensorStack) Len() int { return len(s.values) }

// Values returns a copy of the values in row-major order.
func (s *NonTensorStack) Values() []any {
	out := make([]any, len(s.values))
	for i, v := range s.values {
		out[i] = cloneValue(v)
	}
	return out
}

// At returns (a copy of) the value at index idx, one index per dimension
// of the shape (negative ones count from the end).
func (s *NonTensorStack) At(idx ...int) (any, error) {
	if len(idx) != len(s.shape) {
		return nil, fmt.Errorf("tensordict: NonTensorStack.At: %d indices for shape %v", len(idx), s.shape)
	}
	off := 0
	for d, i := range idx {
		n := s.shape[d]
		if i < -n || i >= n {
			return nil, fmt.Errorf("tensordict: NonTensorStack.At: index %d out of range for dimension %d of shape %v", i, d, s.shape)
		}
		if i < 0 {
			i += n
		}
		off = off*n + i
	}
	return cloneValue(s.values[off]), nil
}

// ToList returns the values as nested []any, one level per dimension, as
// Python's NonTensorStack.tolist (a stack of shape [] gives its one value).
func (s *NonTensorStack) ToList() any {
	v, _ := nestValues(s.values, s.shape)
	return v
}

// nestValues folds flat row-major values of shape into nested []any and
// returns the rest of flat.
func nestValues(flat []any, shape []int) (any, []any) {
	if len(shape) == 0 {
		return cloneValue(flat[0]), flat[1:]
	}
	out := make([]any, shape[0])
	for i := range out {
		out[i], flat = nestValues(flat, shape[1:])
	}
	return out, flat
}

// MarshalJSON encodes the stack as its ToList, the nested JSON list of its
// values (what Python tensordict writes as a NonTensorStack's data).
func (s *NonTensorStack) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.ToList())
}

// String formats s on one line, as a tensor prints: its shape, the kind of
// its values and its first 6 values in row-major order, as compact JSON
// (each cut to 20 characters), "..." standing for the rest:
//
//	NonTensorStack[2 3] string ["a" "b" "c" "d" "e" "f"]
//	NonTensorStack[100] mixed [1 "b" 2.5 ["x"] null true ...]
//
// The kind is the values' JSON type when they share one (string, int64,
// float64, number for integers and floats, bool, list, map, null) and
// mixed otherwise. fmt's %+v prints every value; PythonRepr gives Python's
// repr.
func (s *NonTensorStack) String() string { return s.format(stringValues) }

// Format implements fmt.Formatter: %v and %s print String, %+v and %#v
// print every value, %q prints String quoted.
func (s *NonTensorStack) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && (f.Flag('+') || f.Flag('#')):
		io.WriteString(f, s.format(-1))
	case verb == 'v' || verb == 's':
		io.WriteString(f, s.String())
	case verb == 'q':
		io.WriteString(f, strconv.Quote(s.String()))
	default:
		fmt.Fprintf(f, "%%!%c(*tensordict.NonTensorStack=%s)", verb, s.String())
	}
}

// format is String showing at most n values (all for n < 0).
func (s *NonTensorStack) format(n int) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "NonTensorStack%v %s [", s.shape, stackKind(s.values))
	for i, v := range s.values {
		if n >= 0 && i == n {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(truncateRunes(compactJSON(v), 20))
	}
	b.WriteByte(']')
	return b.String()
}

// stackKind names the JSON type the canonical values share (see String).
func stackKind(values []any) string {
	kind := ""
	for _, v := range values {
		k := "mixed"
		switch v.(type) {
		case nil:
			k = "null"
		case bool:
			k = "bool"
		case int64:
			k = "int64"
		case float64:
			k = "float64"
		case string:
			k = "string"
		case []any:
			k = "list"
		case map[string]any:
			k = "map"
		}
		switch {
		case kind == "" || kind == k:
			kind = k
		case (kind == "int64" || kind == "float64" || kind == "number") && (k == "int64" || k == "float64"):
			kind = "number"
		default:
			return "mixed"
		}
	}
	return kind
}

// PythonRepr prints the stack as Python's repr of a NonTensorStack would,
// without the truncation; String is the Go form.
func (s *NonTensorStack) PythonRepr() string {
	return fmt.Sprintf("NonTensorStack(%s, batch_size=%s, device=None)", pyValue(s.ToList()), torchSize(s.shape))
}

// elementValues returns the per-element values of non-tensor value v (a
// stack or a single value) held at batch size batch, row-major. A single
// value is repeated (shared, not copied); the caller clones what it keeps.
func elementValues(v any, batch []int) ([]any, error) {
	if s, ok := v.(*NonTensorStack); ok {
		if !slices.Equal(s.shape, batch) {
			return nil, fmt.Errorf("non-tensor stack of shape %v held at batch size %v", s.shape, batch)
		}
		return s.values, nil
	}
	n, err := stackLen(batch)
	if err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out, nil
}

// fromElements returns the non-tensor value of per-element values of shape:
// the single value if they are all equal (or there are none, in which case
// empty stands for them), a stack otherwise. It keeps values, which must be
// canonical and the caller's to give away.
func fromElements(values []any, shape []int, empty any) any {
	if len(values) == 0 {
		return empty
	}
	for _, v := range values[1:] {
		if !equalValues(v, values[0]) {
			return &NonTensorStack{shape: slices.Clone(shape), values: values}
		}
	}
	return values[0]
}

// representative returns a single value standing for v: v itself, or the
// first value of a stack (nil for an empty one).
func representative(v any) any {
	if s, ok := v.(*NonTensorStack); ok {
		if len(s.values) == 0 {
			return nil
		}
		return s.values[0]
	}
	return v
}

// stackValues is the non-tensor function of Stack along dimension d: the
// inputs' values, each held at batch size batches[n], stacked into batch
// size nb.
func stackValues(d int) func(Key, []any, [][]int, []int) (any, error) {
	return func(k Key, vs []any, batches [][]int, nb []int) (any, error) {
		if plainEqual(vs) {
			return cloneValue(vs[0]), nil
		}
		b := batches[0]
		outer, inner := prodInts(b[:d]), prodInts(b[d:])
		if _, err := stackLen(nb); err != nil {
			return nil, fmt.Errorf("stacking the differing non-tensor values of key %v: %w", k, err)
		}
		parts := make([][]any, len(vs))
		for n, v := range vs {
			var err error
			if parts[n], err = elementValues(v, batches[n]); err != nil {
				return nil, fmt.Errorf("key %v of tensordict %d: %w", k, n, err)
			}
		}
		out := make([]any, 0, outer*len(vs)*inner)
		for o := range outer {
			for _, p := range parts {
				for _, v := range p[o*inner : (o+1)*inner] {
					out = append(out, cloneValue(v))
				}
			}
		}
		return fromElements(out, nb, cloneValue(representative(vs[0]))), nil
	}
}

// catValues is the non-tensor function of Cat along dimension d.
func catValues(d int) func(Key, []any, [][]int, []int) (any, error) {
	return func(k Key, vs []any, batches [][]int, nb []int) (any, error) {
		if plainEqual(vs) {
			return cloneValue(vs[0]), nil
		}
		if _, err := stackLen(nb); err != nil {
			return nil, fmt.Errorf("concatenating the differing non-tensor values of key %v: %w", k, err)
		}
		outer := prodInts(nb[:d])
		parts := make([][]any, len(vs))
		for n, v := range vs {
			var err error
			if parts[n], err = elementValues(v, batches[n]); err != nil {
				return nil, fmt.Errorf("key %v of tensordict %d: %w", k, n, err)
			}
		}
		out := make([]any, 0, prodInts(nb))
		for o := range outer {
			for n, p := range parts {
				run := prodInts(batches[n][d:])
				for _, v := range p[o*run : (o+1)*run] {
					out = append(out, cloneValue(v))
				}
			}
		}
		return fromElements(out, nb, cloneValue(representative(vs[0]))), nil
	}
}

// plainEqual reports whether every value of vs equals the first, which is
// not a stack (equal stacks still have to be joined).
func plainEqual(vs []any) bool {
	if _, ok := vs[0].(*NonTensorStack); ok {
		return false
	}
	for _, v := range vs[1:] {
		if !equalValues(v, vs[0]) {
			return false
		}
	}
	return true
}

// prodInts returns the product of s (1 for none); the callers' shapes are
// bounded already.
func prodInts(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// mapStack returns the stack s held at a node of batch size batch after a
// layout operation (indexing, slicing, reshaping, permuting, expanding):
// fn, the operation on a leaf, is applied to a tensor of the element
// positions, of shape batch, and the result (which must have shape nb)
// says which element each new one is.
func mapStack(k Key, s *NonTensorStack, nb []int, fn leafFunc) (any, error) {
	pos := make([]int64, len(s.values))
	for i := range pos {
		pos[i] = int64(i)
	}
	t, err := tensor.FromSlice(pos, s.shape...)
	if err != nil {
		return nil, fmt.Errorf("tensordict: non-tensor stack %v: %w", k, err)
	}
	r, err := fn(k, t)
	if err != nil {
		return nil, err
	}
	if r == nil || !slices.Equal(r.Shape(), nb) || r.DType() != tensor.Int64 {
		return nil, fmt.Errorf("tensordict: non-tensor stack %v: the operation does not map its shape %v to %v", k, s.shape, nb)
	}
	if _, err := stackLen(nb); err != nil {
		return nil, fmt.Errorf("tensordict: non-tensor stack %v: %w", k, err)
	}
	at, err := tensor.Data[int64](r.Contiguous())
	if err != nil {
		return nil, fmt.Errorf("tensordict: non-tensor stack %v: %w", k, err)
	}
	out := make([]any, len(at))
	for i, j := range at {
		if j < 0 || j >= int64(len(s.values)) {
			return nil, fmt.Errorf("tensordict: non-tensor stack %v: position %d out of range", k, j)
		}
		out[i] = cloneValue(s.values[j])
	}
	return fromElements(out, nb, cloneValue(s.values[0])), nil
}

// cloneStack returns a deep copy of s.
func cloneStack(s *NonTensorStack) *NonTensorStack {
	out := &NonTensorStack{shape: slices.Clone(s.shape), values: make([]any, len(s.values))}
	for i, v := range s.values {
		out.values[i] = cloneValue(v)
	}
	return out
}

// equalStacks reports whether two stacks have the same shape and values.
func equalStacks(a, b *NonTensorStack) bool {
	if !slices.Equal(a.shape, b.shape) {
		return false
	}
	for i := range a.values {
		if !equalValues(a.values[i], b.values[i]) {
			return false
		}
	}
	return true
}

// GetNonTensorAs returns the non-tensor value named k as a T: the typed
// form of GetNonTensor. The stored value is in canonical form (see
// SetNonTensor: int64, float64, string, bool, []any, map[string]any),
// and is returned as it is when it is a T already. Otherwise it is
// converted as encoding/json decodes its JSON text into a T, so that
// int, float32, []string, map[string]int or a struct work, and a number
// converts between integer and floating types when the value fits: 3.0
// (a float64, as a value from Python or from JSON may be) reads as the
// int 3, while 3.5, or 1e20 as an int64, is an error. A null value reads
// only into a T that can be nil (pointer, slice, map, interface), and a
// NonTensorStack only as a *NonTensorStack. A value that does not convert
// is an error wrapping ErrKind that names the key and both types.
func GetNonTensorAs[T any](td *TensorDict, k Key) (T, error) {
	var zero T
	v, err := td.GetNonTensor(k)
	if err != nil {
		return zero, err
	}
	if x, ok := v.(T); ok {
		return x, nil
	}
	typ := reflect.TypeFor[T]()
	mismatch := func(why string) (T, error) {
		return zero, fmt.Errorf("tensordict: GetNonTensorAs: key %v holds %s, not a %v: %w", k, why, typ, ErrKind)
	}
	switch v.(type) {
	case nil:
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			return zero, nil
		}
		return mismatch("null")
	case *NonTensorStack:
		return mismatch("a NonTensorStack (values that differ along the batch; read it as *NonTensorStack)")
	}
	b, err := json.Marshal(v)
	if err != nil { // canonical values always encode
		return mismatch(fmt.Sprintf("a %T (%v)", v, err))
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return mismatch(fmt.Sprintf("a %T %s", v, truncateRunes(string(b), maxValueRunes)))
	}
	return out, nil
}
