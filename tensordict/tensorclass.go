package tensordict

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/tdmpi/tdmpi/tensor"
)

var (
	classMu     sync.RWMutex
	classByName = map[string]reflect.Type{}
	nameByType  = map[reflect.Type]string{}
)

var (
	tensorType = reflect.TypeFor[*tensor.Tensor]()
	tdType     = reflect.TypeFor[*TensorDict]()
	intsType   = reflect.TypeFor[[]int]()
)

// RegisterClass records the struct type T under name, so that a receiver can
// rebuild the right Go type from the class name a TensorDict carries (see
// ClassName, Lookup and Instantiate). Python tensordict uses the class's
// "module.QualName"; any name unique in the program will do. It panics if T
// is not a struct type or if name or T is already registered differently
// (programming errors).
func RegisterClass[T any](name string) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tensordict: RegisterClass(%q): %v is not a struct type", name, t))
	}
	if name == "" {
		panic(fmt.Sprintf("tensordict: RegisterClass: empty name for %v", t))
	}
	classMu.Lock()
	defer classMu.Unlock()
	if old, ok := classByName[name]; ok && old != t {
		panic(fmt.Sprintf("tensordict: RegisterClass(%q): name already registered for %v", name, old))
	}
	if old, ok := nameByType[t]; ok && old != name {
		panic(fmt.Sprintf("tensordict: RegisterClass(%q): %v already registered as %q", name, t, old))
	}
	classByName[name] = t
	nameByType[t] = name
}

// ClassName returns the name registered for the struct type of v (v may be a
// struct, a pointer to one, or a reflect.Type), or "" if there is none.
func ClassName(v any) string {
	t, ok := v.(reflect.Type)
	if !ok {
		t = reflect.TypeOf(v)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	classMu.RLock()
	defer classMu.RUnlock()
	return nameByType[t]
}

// Lookup returns the struct type registered under name.
func Lookup(name string) (reflect.Type, bool) {
	classMu.RLock()
	defer classMu.RUnlock()
	t, ok := classByName[name]
	return t, ok
}

// Instantiate builds a new value of the struct type registered under
// td.ClassName() and fills it with ToStruct. It returns a pointer to the
// struct, as an any.
func Instantiate(td *TensorDict) (any, error) {
	t, ok := Lookup(td.class)
	if !ok {
		return nil, fmt.Errorf("tensordict: Instantiate: class %q is not registered", td.class)
	}
	p := reflect.New(t)
	if err := toStruct(td, nil, p.Elem()); err != nil {
		return nil, fmt.Errorf("tensordict: Instantiate %q: %w", td.class, err)
	}
	return p.Interface(), nil
}

// StructOption changes how FromStruct builds a TensorDict.
type StructOption func(*structConfig)

type structConfig struct {
	batch    []int
	hasBatch bool
}

// WithBatchSize sets the batch size FromStruct gives a struct without a
// batch field.
func WithBatchSize(shape ...int) StructOption {
	return func(c *structConfig) { c.batch, c.hasBatch = append([]int(nil), shape...), true }
}

// structField is a mapped field of a tensorclass struct.
type structField struct {
	index []int
	name  string
	batch bool
}

// fieldsOf returns the mapped fields of struct type t.
func fieldsOf(t reflect.Type) ([]structField, error) {
	var out []structField
	seen := map[string]bool{}
	batchSeen := false
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("td")
		if tag == "-" {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		if opt == "batch" {
			if f.Type != intsType {
				return nil, fmt.Errorf("%v.%s: batch field must be []int, is %v", t, f.Name, f.Type)
			}
			if batchSeen {
				return nil, fmt.Errorf("%v: two batch fields", t)
			}
			batchSeen = true
			out = append(out, structField{index: f.Index, batch: true})
			continue
		}
		if opt != "" {
			return nil, fmt.Errorf("%v.%s: unknown td tag option %q", t, f.Name, opt)
		}
		if name == "" {
			name = f.Name
		}
		if seen[name] {
			return nil, fmt.Errorf("%v.%s: entry name %q used twice", t, f.Name, name)
		}
		seen[name] = true
		out = append(out, structField{index: f.Index, name: name})
	}
	return out, nil
}

// structOf returns the struct value v holds or points to.
func structOf(v reflect.Value) (reflect.Value, bool) {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return reflect.Value{}, false
		}
		v = v.Elem()
	}
	return v, v.IsValid() && v.Kind() == reflect.Struct
}

// isStructLike reports whether fields of type t become nested TensorDicts.
func isStructLike(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// FromStruct builds a TensorDict from a tensorclass struct (or a pointer to
// one); see the package documentation of tensorclasses for the mapping.
// Tensors are shared, not copied. The result's ClassName is the name
// registered for the struct's type, if any.
func FromStruct(v any, opts ...StructOption) (*TensorDict, error) {
	var c structConfig
	for _, o := range opts {
		o(&c)
	}
	sv, ok := structOf(reflect.ValueOf(v))
	if !ok {
		return nil, fmt.Errorf("tensordict: FromStruct: %T is not a struct or a non-nil pointer to one", v)
	}
	batch := c.batch
	if !c.hasBatch {
		batch = []int{}
	}
	td, err := fromStruct(sv, nil, batch, 0)
	if err != nil {
		return nil, fmt.Errorf("tensordict: FromStruct: %w", err)
	}
	return td, nil
}

func fromStruct(sv reflect.Value, prefix Key, parentBatch []int, depth int) (*TensorDict, error) {
	if depth > maxPlanDepth {
		return nil, fmt.Errorf("key %v: structs nested deeper than %d levels", prefix, maxPlanDepth)
	}
	fields, err := fieldsOf(sv.Type())
	if err != nil {
		return nil, err
	}
	batch := parentBatch
	for _, f := range fields {
		if f.batch {
			batch = sv.FieldByIndex(f.index).Interface().([]int)
			if batch == nil {
				batch = parentBatch
			}
		}
	}
	for i, d := range batch {
		if d < 0 {
			return nil, fmt.Errorf("%v: batch size %v: dimension %d is negative", sv.Type(), batch, i)
		}
	}
	if !hasPrefix(batch, parentBatch) {
		return nil, fmt.Errorf("key %v: batch size %v does not start with parent batch size %v", prefix, batch, parentBatch)
	}
	td := newTD(batch)
	td.class = ClassName(sv.Type())
	for _, f := range fields {
		if f.batch {
			continue
		}
		fv := sv.FieldByIndex(f.index)
		k := K(f.name)
		switch {
		case fv.Type() == tensorType:
			if fv.IsNil() {
				continue
			}
			err = td.Set(k, fv.Interface().(*tensor.Tensor))
		case fv.Type() == tdType:
			if fv.IsNil() {
				continue
			}
			err = td.SetTD(k, fv.Interface().(*TensorDict))
		case isStructLike(fv.Type()):
			inner, ok := structOf(fv)
			if !ok {
				continue // nil pointer
			}
			var sub *TensorDict
			if sub, err = fromStruct(inner, prefix.child(f.name), batch, depth+1); err != nil {
				return nil, err
			}
			err = td.SetTD(k, sub)
		default:
			err = td.SetNonTensor(k, fv.Interface())
		}
		if err != nil {
			return nil, fmt.Errorf("%v field %s: %w", sv.Type(), f.name, err)
		}
	}
	return td, nil
}

// ToStruct fills the tensorclass struct ptr points to from td: tensor leaves
// (shared, not copied), nested TensorDicts (into struct, pointer-to-struct or
// *TensorDict fields), non-tensor values (converted to the field's type as
// encoding/json would) and the batch field. Fields without an entry keep
// their value. It returns an error naming the key if an entry has no field or
// does not fit its field.
func ToStruct(td *TensorDict, ptr any) error {
	pv := reflect.ValueOf(ptr)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("tensordict: ToStruct: %T is not a non-nil pointer to a struct", ptr)
	}
	if err := toStruct(td, nil, pv.Elem()); err != nil {
		return fmt.Errorf("tensordict: ToStruct: %w", err)
	}
	return nil
}

// As returns td as a value of the tensorclass type T (a struct type or a
// pointer to one), filled by ToStruct. If td carries a class name and T is
// registered under another one, As returns an error.
func As[T any](td *TensorDict) (T, error) {
	var zero T
	t := reflect.TypeFor[T]()
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return zero, fmt.Errorf("tensordict: As: %v is not a struct type or a pointer to one", t)
	}
	if name := ClassName(st); td.class != "" && name != "" && name != td.class {
		return zero, fmt.Errorf("tensordict: As: tensordict holds class %q, %v is registered as %q", td.class, t, name)
	}
	p := reflect.New(st)
	if err := toStruct(td, nil, p.Elem()); err != nil {
		return zero, fmt.Errorf("tensordict: As[%v]: %w", t, err)
	}
	if t.Kind() == reflect.Pointer {
		return p.Interface().(T), nil
	}
	return p.Elem().Interface().(T), nil
}

func toStruct(td *TensorDict, prefix Key, sv reflect.Value) error {
	fields, err := fieldsOf(sv.Type())
	if err != nil {
		return err
	}
	byName := make(map[string]structField, len(fields))
	for _, f := range fields {
		if f.batch {
			sv.FieldByIndex(f.index).Set(reflect.ValueOf(td.BatchSize()))
			continue
		}
		byName[f.name] = f
	}
	for i := range td.entries {
		e := &td.entries[i]
		k := prefix.child(e.name)
		f, ok := byName[e.name]
		if !ok {
			return fmt.Errorf("key %v has no field in %v", k, sv.Type())
		}
		fv := sv.FieldByIndex(f.index)
		switch {
		case e.kind == kindTensor:
			if fv.Type() != tensorType {
				return fmt.Errorf("key %v: tensor %v%v does not fit field of type %v", k, e.t.DType(), e.t.Shape(), fv.Type())
			}
			fv.Set(reflect.ValueOf(e.t))
		case e.kind == kindTD && fv.Type() == tdType:
			fv.Set(reflect.ValueOf(e.td))
		case e.kind == kindTD && isStructLike(fv.Type()):
			target := fv
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				target = fv.Elem()
			}
			if err := toStruct(e.td, k, target); err != nil {
				return err
			}
		case e.kind == kindTD:
			return fmt.Errorf("key %v: nested tensordict does not fit field of type %v", k, fv.Type())
		default: // non-tensor
			if fv.Type() == tensorType || fv.Type() == tdType || isStructLike(fv.Type()) {
				return fmt.Errorf("key %v: non-tensor value does not fit field of type %v", k, fv.Type())
			}
			b, err := json.Marshal(e.v)
			if err != nil {
				return fmt.Errorf("key %v: %w", k, err)
			}
			nv := reflect.New(fv.Type())
			if err := json.Unmarshal(b, nv.Interface()); err != nil {
				return fmt.Errorf("key %v: value %s does not fit field of type %v: %w", k, b, fv.Type(), err)
			}
			fv.Set(nv.Elem())
		}
	}
	return nil
}
