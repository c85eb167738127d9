package tensordict

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/internal/codec"
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
