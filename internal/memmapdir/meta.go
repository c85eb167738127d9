package memmapdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/tensor"
)

// MetaFile is the name of the metadata file of every node of a saved
// TensorDict.
const MetaFile = "meta.json"

// MaxMetaSize is the largest meta.json ReadMeta accepts, in bytes. A
// TensorDict node with a million entries needs about 100 MB; nodes that
// large are refused rather than read into memory from an untrusted directory.
const MaxMetaSize = 16 << 20

// The "_type" strings tensordict writes in meta.json: Python's str(cls) of
// the saved class.
const (
	TypeTensorDict     = "<class 'tensordict._td.TensorDict'>"
	TypeNonTensorData  = "<class 'tensordict.tensorclass.NonTensorData'>"
	TypeNonTensorStack = "<class 'tensordict.tensorclass.NonTensorStack'>"
	TypeLazyStacked    = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
)

// The collection kinds ("type" of a nested entry in a parent's meta.json):
// Python's type(value).__name__.
const (
	KindTensorDict     = "TensorDict"
	KindNonTensorData  = "NonTensorData"
	KindNonTensorStack = "NonTensorStack"
)

// Meta is the content of one meta.json: its top-level members in file order.
// Member values are kept as raw JSON; TensorDict and NonTensor interpret
// them.
type Meta struct {
	// Path is the file the Meta was read from, for messages ("" if parsed
	// from a reader).
	Path string
	// Type is the "_type" member ("" if absent).
	Type string
	// Fields are every top-level member, "_type" included, in file order.
	Fields []Field
}

// Field is one top-level member of a meta.json.
type Field struct {
	Name  string
	Value json.RawMessage
}

// Get returns the value of the member called name.
func (m *Meta) Get(name string) (json.RawMessage, bool) {
	for _, f := range m.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// where names m's file in messages.
func (m *Meta) where() string {
	if m.Path == "" {
		return MetaFile
	}
	return m.Path
}

// ReadMeta reads and parses the meta.json file at path. It refuses symbolic
// links and anything that is not a regular file (a named pipe is refused,
// not waited on), and files larger than MaxMetaSize, reading at most
// MaxMetaSize+1 bytes. Every error names the file.
func ReadMeta(path string) (*Meta, error) {
	f, fi, err := OpenRegular("ReadMeta", path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > MaxMetaSize {
		return nil, fmt.Errorf("memmap: %s: %d bytes, larger than the %d-byte limit for metadata", path, fi.Size(), MaxMetaSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxMetaSize+1))
	if err != nil {
		return nil, fmt.Errorf("memmap: %s: %w", path, err)
	}
	if len(data) > MaxMetaSize {
		return nil, fmt.Errorf("memmap: %s: larger than the %d-byte limit for metadata", path, MaxMetaSize)
	}
	m, err := ParseMeta(data)
	if err != nil {
		return nil, fmt.Errorf("memmap: %s: %w", path, err)
	}
	m.Path = path
	return m, nil
}

// ParseMeta parses the text of a meta.json. It accepts any JSON spacing (the
// standard library's and orjson's compact form alike), keeps the members in
// order, and rejects a document that is not one JSON object, has duplicate
// members, or a "_type" that is not a string.
func ParseMeta(data []byte) (*Meta, error) {
	if len(data) > MaxMetaSize {
		return nil, fmt.Errorf("metadata of %d bytes exceeds the %d-byte limit", len(data), MaxMetaSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("bad JSON: top level is not an object")
	}
	m := &Meta{}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("bad JSON: %w", err)
		}
		name := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("bad JSON in member %q: %w", name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("duplicate member %q", name)
		}
		seen[name] = true
		m.Fields = append(m.Fields, Field{Name: name, Value: raw})
		if name == "_type" {
			if err := json.Unmarshal(raw, &m.Type); err != nil {
				return nil, fmt.Errorf("member \"_type\" is not a string")
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("bad JSON: trailing data after the object")
	}
	return m, nil
}

// Leaf describes one tensor entry of a TensorDict node.
type Leaf struct {
	// Device is the device the tensor was on before it was saved
	// (informational; "cpu" for tdmpi).
	Device string
	// Shape is the tensor's shape.
	Shape []int
	// DType is the element type.
	DType tensor.DType
	// IsNested is tensordict's flag for nested (jagged) tensors, which tdmpi
	// does not support; TensorDict rejects it on reading.
	IsNested bool
}

// Entry is one entry of a TensorDict node: a tensor leaf, or a nested
// collection stored in the sub-directory EncodeKey(Key).
type Entry struct {
	Key string
	// Leaf describes a tensor entry; it is nil for a collection.
	Leaf *Leaf
	// Kind is the collection's Python class name ("TensorDict",
	// "NonTensorData", ...); it is "" for a leaf.
	Kind string
}

// TensorDictMeta is the meta.json of a TensorDict node.
type TensorDictMeta struct {
	// Entries are the node's entries in insertion order.
	Entries []Entry
	// BatchSize is the "shape" member.
	BatchSize []int
	// Device is the "device" member; "" stands for Python's None.
	Device string
	// Class is the tdmpi tensorclass name of the node, written as the
	// member "_tdmpi_class" when not empty. Python tensordict ignores it
	// (its loader skips members that are not objects) and loads a plain
	// TensorDict.
	Class string
}

// classMember is the member that carries TensorDictMeta.Class.
const classMember = "_tdmpi_class"

// reserved are the trailer members of a TensorDict node; entries cannot
// have these keys, since the trailer would overwrite them.
var reserved = map[string]bool{"shape": true, "device": true, "_type": true, classMember: true}

// IsReservedKey reports whether key collides with a member tensordict adds
// to every TensorDict meta.json ("shape", "device" or "_type"), or with
// tdmpi's "_tdmpi_class". Python tensordict silently loses such entries when
// saving; tdmpi refuses them.
func IsReservedKey(key string) bool { return reserved[key] }

// TensorDict interprets m as the meta.json of a TensorDict node. Following
// tensordict's loader, members whose value is not an object are ignored
// (the trailer and any extra metadata) and entries with a "type" member are
// collections. Unlike tensordict, an entry that is neither a collection nor a
// complete tensor description (dtype, shape) is an error, as are unknown
// dtypes, negative dimensions and shapes whose byte size overflows. Every
// error names the file and the entry.
func (m *Meta) TensorDict() (*TensorDictMeta, error) {
	if m.Type != TypeTensorDict {
		return nil, fmt.Errorf("memmap: %s: _type is %q, not a TensorDict", m.where(), m.Type)
	}
	td := &TensorDictMeta{}
	if raw, ok := m.Get("shape"); ok {
		s, err := parseShape(raw)
		if err != nil {
			return nil, fmt.Errorf("memmap: %s: batch size \"shape\": %w", m.where(), err)
		}
		td.BatchSize = s
	} else {
		td.BatchSize = []int{}
	}
	if raw, ok := m.Get("device"); ok {
		var dev *string
		if err := json.Unmarshal(raw, &dev); err != nil {
			return nil, fmt.Errorf("memmap: %s: \"device\" is not a string", m.where())
		}
		if dev != nil && *dev != "None" {
			td.Device = *dev
		}
	}
	if raw, ok := m.Get(classMember); ok {
		if err := json.Unmarshal(raw, &td.Class); err != nil {
			return nil, fmt.Errorf("memmap: %s: %q is not a string", m.where(), classMember)
		}
	}
	for _, f := range m.Fields {
		if reserved[f.Name] || len(f.Value) == 0 || f.Value[0] != '{' {
			continue
		}
		e, err := parseEntry(f)
		if err != nil {
			return nil, fmt.Errorf("memmap: %s: entry %q: %w", m.where(), f.Name, err)
		}
		td.Entries = append(td.Entries, e)
	}
	return td, nil
}

// rawLeaf is the JSON form of a leaf or collection entry.
type rawLeaf struct {
	Type     *string          `json:"type"`
	Device   *string          `json:"device"`
	Shape    *json.RawMessage `json:"shape"`
	DType    *string          `json:"dtype"`
	IsNested *bool            `json:"is_nested"`
}

func parseEntry(f Field) (Entry, error) {
	var r rawLeaf
	if err := json.Unmarshal(f.Value, &r); err != nil {
		return Entry{}, err
	}
	if r.Type != nil {
		if *r.Type == "" {
			return Entry{}, errors.New("empty collection type")
		}
		return Entry{Key: f.Name, Kind: *r.Type}, nil
	}
	if r.DType == nil || r.Shape == nil {
		return Entry{}, errors.New("neither a collection (\"type\") nor a tensor (\"dtype\" and \"shape\")")
	}
	dt, err := tensor.ParseDType(*r.DType)
	if err != nil {
		return Entry{}, fmt.Errorf("unsupported dtype %q", *r.DType)
	}
	shape, err := parseShape(*r.Shape)
	if err != nil {
		return Entry{}, fmt.Errorf("shape: %w", err)
	}
	if _, err := tensor.NBytesOf(dt, shape); err != nil {
		return Entry{}, err
	}
	l := &Leaf{Shape: shape, DType: dt}
	if r.Device != nil {
		l.Device = *r.Device
	}
	if r.IsNested != nil {
		l.IsNested = *r.IsNested
	}
	return Entry{Key: f.Name, Leaf: l}, nil
}

// maxDims bounds the number of dimensions of a shape read from a file.
const maxDims = 64

// parseShape reads a JSON array of non-negative integers.
func parseShape(raw json.RawMessage) ([]int, error) {
	var nums []json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&nums); err != nil || nums == nil {
		return nil, fmt.Errorf("%s is not a list of integers", clip(raw))
	}
	if len(nums) > maxDims {
		return nil, fmt.Errorf("%d dimensions, more than %d", len(nums), maxDims)
	}
	shape := make([]int, len(nums))
	for i, n := range nums {
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v < 0 || int64(int(v)) != v {
			return nil, fmt.Errorf("dimension %d is %s, not a non-negative integer", i, n)
		}
		shape[i] = int(v)
	}
	return shape, nil
}

// clip shortens raw JSON for messages.
func clip(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// Marshal returns the meta.json text of the node, field for field as
// tensordict writes it with Python's standard json module: the entries in
// order, leaves as {"device", "shape", "dtype", "is_nested"} and collections
// as {"type"}, then "shape", "device" and "_type". A Device of "" is written
// "None". It returns an error if an entry key is reserved (IsReservedKey)
// or duplicated, or a leaf's dtype is invalid.
func (td *TensorDictMeta) Marshal() ([]byte, error) {
	b := []byte{'{'}
	seen := make(map[string]bool, len(td.Entries))
	for _, e := range td.Entries {
		if reserved[e.Key] {
			return nil, fmt.Errorf("memmap: key %q collides with the %q member of meta.json", e.Key, e.Key)
		}
		if seen[e.Key] {
			return nil, fmt.Errorf("memmap: duplicate key %q", e.Key)
		}
		seen[e.Key] = true
		b = appendPyString(b, e.Key)
		b = append(b, ": "...)
		switch {
		case e.Leaf != nil:
			l := e.Leaf
			if !l.DType.Valid() {
				return nil, fmt.Errorf("memmap: key %q: invalid dtype %v", e.Key, l.DType)
			}
			dev := l.Device
			if dev == "" {
				dev = "cpu"
			}
			b = append(b, `{"device": `...)
			b = appendPyString(b, dev)
			b = append(b, `, "shape": `...)
			b = appendInts(b, l.Shape)
			b = append(b, `, "dtype": `...)
			b = appendPyString(b, l.DType.TorchName())
			b = append(b, `, "is_nested": `...)
			b = strconv.AppendBool(b, l.IsNested)
			b = append(b, '}')
		case e.Kind != "":
			b = append(b, `{"type": `...)
			b = appendPyString(b, e.Kind)
			b = append(b, '}')
		default:
			return nil, fmt.Errorf("memmap: key %q is neither a leaf nor a collection", e.Key)
		}
		b = append(b, ", "...)
	}
	if td.Class != "" {
		b = append(b, `"`+classMember+`": `...)
		b = appendPyString(b, td.Class)
		b = append(b, ", "...)
	}
	b = append(b, `"shape": `...)
	b = appendInts(b, td.BatchSize)
	b = append(b, `, "device": `...)
	dev := td.Device
	if dev == "" {
		dev = "None"
	}
	b = appendPyString(b, dev)
	b = append(b, `, "_type": `...)
	b = appendPyString(b, TypeTensorDict)
	return append(b, '}'), nil
}

// appendInts appends a JSON list of integers with Python spacing.
func appendInts(b []byte, s []int) []byte {
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, ']')
}

// NonTensorMeta is the meta.json of a NonTensorData node.
type NonTensorMeta struct {
	// Data is the JSON value of the data. A node whose data tensordict could
	// not write as JSON has no "data" member and an other.pickle file
	// instead; tdmpi never reads pickle, and Data is nil then.
	Data json.RawMessage
}

// NonTensor interprets m as the meta.json of a NonTensorData node.
func (m *Meta) NonTensor() (*NonTensorMeta, error) {
	if m.Type != TypeNonTensorData {
		return nil, fmt.Errorf("memmap: %s: _type is %q, not NonTensorData", m.where(), m.Type)
	}
	raw, ok := m.Get("data")
	if !ok {
		return &NonTensorMeta{}, nil
	}
	return &NonTensorMeta{Data: raw}, nil
}

// Marshal returns the meta.json text of a NonTensorData node as tensordict
// writes it: {"_type": ..., "data": <data>, "_metadata": null}, the data
// re-spaced like Python's json.dumps.
func (n *NonTensorMeta) Marshal() ([]byte, error) {
	b := []byte(`{"_type": `)
	b = appendPyString(b, TypeNonTensorData)
	b = append(b, `, "data": `...)
	data := n.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	b, err := respace(b, data)
	if err != nil {
		return nil, err
	}
	return append(b, `, "_metadata": null}`...), nil
}

// NonTensorStackMeta is the meta.json of a NonTensorStack node: Python
// tensordict writes {"_type":...,"stack_dim":k,"device":null,"data":[...]},
// compact, with data the nested list of the values (the stack's tolist, in
// batch order whatever stack_dim is), or "pickle.pkl" and a pickle.pkl file
// when they are not JSON-able.
type NonTensorStackMeta struct {
	StackDim int
	Device   string // "" for null
	// Data is the JSON value of the data, nil if absent.
	Data json.RawMessage
}

// PickledStackData is the "data" of a NonTensorStack meta.json whose values
// Python pickled into the file of that name.
const PickledStackData = "pickle.pkl"

// NonTensorStack interprets m as the meta.json of a NonTensorStack node.
func (m *Meta) NonTensorStack() (*NonTensorStackMeta, error) {
	if m.Type != TypeNonTensorStack {
		return nil, fmt.Errorf("memmap: %s: _type is %q, not NonTensorStack", m.where(), m.Type)
	}
	n := &NonTensorStackMeta{}
	if raw, ok := m.Get("stack_dim"); ok {
		if err := json.Unmarshal(raw, &n.StackDim); err != nil || n.StackDim < 0 {
			return nil, fmt.Errorf("memmap: %s: stack_dim %s is not a non-negative integer", m.where(), clip(raw))
		}
	}
	if raw, ok := m.Get("device"); ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &n.Device); err != nil {
			return nil, fmt.Errorf("memmap: %s: device %s is not a string", m.where(), clip(raw))
		}
	}
	if raw, ok := m.Get("data"); ok {
		n.Data = raw
	}
	return n, nil
}

// Marshal returns the meta.json text of a NonTensorStack node as tensordict
// writes it, compact (separators "," and ":"), with the data re-formatted
// the same way.
func (n *NonTensorStackMeta) Marshal() ([]byte, error) {
	b := []byte(`{"_type":`)
	b = appendPyString(b, TypeNonTensorStack)
	b = append(b, `,"stack_dim":`...)
	b = strconv.AppendInt(b, int64(n.StackDim), 10)
	b = append(b, `,"device":`...)
	if n.Device == "" {
		b = append(b, "null"...)
	} else {
		b = appendPyString(b, n.Device)
	}
	b = append(b, `,"data":`...)
	data := n.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, fmt.Errorf("memmap: NonTensorStack data: %w", err)
	}
	b = append(b, buf.Bytes()...)
	return append(b, '}'), nil
}

// DecodeData decodes the JSON value of non-tensor data into Go values:
// objects become map[string]any, arrays []any, strings string, booleans
// bool, null nil, integers int (int64 range) and other numbers float64.
func DecodeData(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("memmap: non-tensor data: %w", err)
	}
	return convertNumbers(v)
}

func convertNumbers(v any) (any, error) {
	var err error
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil && int64(int(i)) == i {
			return int(i), nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("memmap: non-tensor data: number %s does not fit a float64", clip([]byte(t)))
		}
		return f, nil
	case []any:
		for i := range t {
			if t[i], err = convertNumbers(t[i]); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range t {
			if t[k], err = convertNumbers(t[k]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// WriteMeta writes data as the file path crash-safely: to a temporary file in
// the same directory, synced, then renamed over path, and the directory
// synced. After a crash, path holds either its old content or data, never a
// part of it. A symbolic link at path is refused.
func WriteMeta(path string, data []byte) error { return writeMeta(path, data, true) }

// WriteMetaNoSync is WriteMeta without the syncs: the rename still makes
// the change all at once for other processes, but a power failure may lose
// or garble it.
func WriteMetaNoSync(path string, data []byte) error { return writeMeta(path, data, false) }

func writeMeta(path string, data []byte, sync bool) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("memmap: %s: refusing to replace a symbolic link", path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("memmap: writing %s: %w", path, err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("memmap: writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("memmap: writing %s: %w", path, err)
	}
	if !sync {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir flushes the directory entries of dir to the storage device, so
// that files created or renamed in it survive a crash. It returns an error
// if dir is not a directory.
func SyncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("memmap: syncing directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("memmap: syncing directory %s: %w", dir, err)
	}
	return nil
}
