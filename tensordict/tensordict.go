package tensordict

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// nilError is the error of op called on a nil *TensorDict.
func nilError(op string) error { return fmt.Errorf("tensordict: %s: %w", op, ErrNil) }

// kind is what an entry holds.
type kind uint8

const (
	kindTensor    kind = iota + 1 // a *tensor.Tensor leaf
	kindTD                        // a nested *TensorDict
	kindNonTensor                 // a JSON-able Go value
)

func (k kind) String() string {
	switch k {
	case kindTensor:
		return "tensor"
	case kindTD:
		return "tensordict"
	case kindNonTensor:
		return "non-tensor value"
	}
	return "nothing"
}

// entry is one named value of a TensorDict node.
type entry struct {
	name string
	kind kind
	t    *tensor.Tensor
	td   *TensorDict
	v    any
}

// TensorDict is an ordered tree of named tensors that share leading batch
// dimensions. Each entry is a tensor leaf, a nested TensorDict (whose batch
// size starts with its parent's), or a non-tensor value (a string, number,
// bool, nil, or slice or string-keyed map of those, as Python tensordict's
// NonTensorData).
//
// Entries keep their insertion order. A TensorDict is not safe for concurrent
// use when one goroutine mutates it, exactly like a Go map; concurrent reads
// are safe.
type TensorDict struct {
	batch   []int
	entries []entry
	index   map[string]int
	// sharedIndex: index is shared with a receive template (see
	// treeTemplate) and must be copied before it is changed (ownIndex).
	sharedIndex bool
	locked      bool
	initSent    atomic.Bool              // InitRemote or Broadcast sent it (see initRemote, bcastSource); beside the bools, it fills their word
	class       string                   // tensorclass name, "" for a plain TensorDict
	savedPath   *string                  // memmap prefix, kept for memmap.go; nil for none (most trees: half the bytes of a string)
	cons        *consState               // set by Consolidate and FromConsolidated
	p2p         atomic.Pointer[p2pState] // Send/Recv state, see p2p_state.go
	edits       uint64                   // changes to this node (see edited)
	tmpl        *treeTemplate            // on the root of a copy of a receive template (treeTemplate)
	source      int32                    // 1 + the rank the last receive into it came from, 0 for none (see Source)
}

// New returns an empty TensorDict with the given batch size. It panics if a
// dimension is negative (a programming error).
func New(batchSize ...int) *TensorDict {
	for i, d := range batchSize {
		if d < 0 {
			panic(fmt.Sprintf("tensordict: New: batch size %v: dimension %d is negative", batchSize, i))
		}
	}
	return newTD(batchSize)
}

// newTD returns an empty TensorDict holding a copy of batch.
func newTD(batch []int) *TensorDict {
	return &TensorDict{batch: append(make([]int, 0, len(batch)), batch...)}
}

// BatchSize returns a copy of the batch size: the leading dimensions every
// leaf shares (nil for a nil *TensorDict).
func (td *TensorDict) BatchSize() []int {
	if td == nil {
		return nil
	}
	return append(make([]int, 0, len(td.batch)), td.batch...)
}

// BatchDims returns the number of batch dimensions.
func (td *TensorDict) BatchDims() int {
	if td == nil {
		return 0
	}
	return len(td.batch)
}

// Numel returns the number of elements of the batch: the product of the batch
// size (1 for an empty batch size, 0 for a nil *TensorDict).
func (td *TensorDict) Numel() int {
	if td == nil {
		return 0
	}
	n := 1
	for _, d := range td.batch {
		n *= d
	}
	return n
}

// Len returns the number of top-level entries (0 for a nil *TensorDict).
func (td *TensorDict) Len() int {
	if td == nil {
		return 0
	}
	return len(td.entries)
}

// ClassName returns the tensorclass name the TensorDict was built from or is
// to be rebuilt as (see RegisterClass), or "" for a plain TensorDict.
func (td *TensorDict) ClassName() string {
	if td == nil {
		return ""
	}
	return td.class
}

// SetClassName records the tensorclass name of td (see RegisterClass and
// FromStruct). An empty name makes td a plain TensorDict.
func (td *TensorDict) SetClassName(name string) {
	td.edited()
	td.class = name
}

// setSavedPath records the memmap prefix td was saved to or loaded from.
func (td *TensorDict) setSavedPath(p string) {
	td.savedPath = nil
	if p != "" {
		td.savedPath = &p
	}
}

// savedPathValue returns the memmap prefix recorded by setSavedPath.
func (td *TensorDict) savedPathValue() string {
	if td == nil || td.savedPath == nil {
		return ""
	}
	return *td.savedPath
}

// validKey returns an error if k has no parts.
func validKey(op string, k Key) error {
	if len(k) == 0 {
		return fmt.Errorf("tensordict: %s: empty key", op)
	}
	return nil
}

// find returns the node holding the last part of k and the entry index
// there, or an error naming k. It does not allocate when k is found.
func (td *TensorDict) find(op string, k Key) (*TensorDict, int, error) {
	if td == nil {
		return nil, -1, nilError(op)
	}
	if len(k) == 0 {
		return nil, -1, validKey(op, k)
	}
	node := td
	for i := 0; i < len(k)-1; i++ {
		j, ok := node.lookup(k[i])
		if !ok {
			return nil, -1, fmt.Errorf("tensordict: %s: key %v: %w (no entry %v)", op, k, ErrNotFound, k[:i+1])
		}
		e := &node.entries[j]
		if e.kind != kindTD {
			return nil, -1, fmt.Errorf("tensordict: %s: key %v: entry %v is a %v, not a tensordict: %w", op, k, k[:i+1], e.kind, ErrKind)
		}
		node = e.td
	}
	j, ok := node.lookup(k[len(k)-1])
	if !ok {
		return nil, -1, fmt.Errorf("tensordict: %s: key %v: %w", op, k, ErrNotFound)
	}
	return node, j, nil
}

// Has reports whether k names an entry of any kind.
func (td *TensorDict) Has(k Key) bool {
	_, _, err := td.find("Has", k)
	return err == nil
}

// Get returns the tensor leaf named k. The result shares memory with the
// TensorDict. Get of a nested key does not allocate.
func (td *TensorDict) Get(k Key) (*tensor.Tensor, error) {
	node, j, err := td.find("Get", k)
	if err != nil {
		return nil, err
	}
	e := &node.entries[j]
	if e.kind != kindTensor {
		return nil, fmt.Errorf("tensordict: Get: key %v is a %v, not a tensor: %w", k, e.kind, ErrKind)
	}
	return e.t, nil
}

// GetTD returns the nested TensorDict named k (the same object, not a copy).
func (td *TensorDict) GetTD(k Key) (*TensorDict, error) {
	node, j, err := td.find("GetTD", k)
	if err != nil {
		return nil, err
	}
	e := &node.entries[j]
	if e.kind != kindTD {
		return nil, fmt.Errorf("tensordict: GetTD: key %v is a %v, not a tensordict: %w", k, e.kind, ErrKind)
	}
	return e.td, nil
}

// GetNonTensor returns the non-tensor value named k, in the canonical form
// SetNonTensor stores (see SetNonTensor).
func (td *TensorDict) GetNonTensor(k Key) (any, error) {
	node, j, err := td.find("GetNonTensor", k)
	if err != nil {
		return nil, err
	}
	e := &node.entries[j]
	if e.kind != kindNonTensor {
		return nil, fmt.Errorf("tensordict: GetNonTensor: key %v is a %v, not a non-tensor value: %w", k, e.kind, ErrKind)
	}
	return e.v, nil
}

// parentFor walks k[:len(k)-1] for a write. It returns the deepest existing
// node, the number of parts of k it consumed, and the batch size a new entry
// under k must start with. Missing levels are not created.
func (td *TensorDict) parentFor(op string, k Key) (node *TensorDict, depth int, err error) {
	if td == nil {
		return nil, 0, nilError(op)
	}
	node = td
	for depth = 0; depth < len(k)-1; depth++ {
		j, ok := node.lookup(k[depth])
		if !ok {
			return node, depth, nil
		}
		e := &node.entries[j]
		if e.kind != kindTD {
			return nil, 0, fmt.Errorf("tensordict: %s: key %v: entry %v is a %v, cannot hold nested entries", op, k, k[:depth+1], e.kind)
		}
		node = e.td
	}
	return node, depth, nil
}

// makeLevels creates the missing nested levels k[depth:len(k)-1] below node
// and returns the node that will hold k's last part.
func makeLevels(op string, k Key, node *TensorDict, depth int) (*TensorDict, error) {
	for ; depth < len(k)-1; depth++ {
		if node.locked {
			return nil, fmt.Errorf("tensordict: %s: key %v: cannot add %v: %w", op, k, k[:depth+1], ErrLocked)
		}
		sub := newTD(node.batch)
		node.add(k[depth], entry{kind: kindTD, td: sub})
		node = sub
	}
	return node, nil
}

// edited records a change to td's own entries, batch size, lock state or
// class name: the functions every such change goes through call it (add,
// appendEntry, removeEntry, setBatch, setLocked, SetClassName; Memmap
// swaps leaves' tensors, which Send and Recv compare themselves). Send and
// Recv keep, with their state, the count of each node of the tree they
// last checked: while none has moved, the TensorDict's metadata cannot
// have changed, except through the values of composite non-tensor
// entries, which a caller may edit in place (see p2pState.refresh).
func (td *TensorDict) edited() { td.edits++ }

// add appends or replaces the entry name in td.
func (td *TensorDict) add(name string, e entry) {
	td.edited()
	e.name = name
	if j, ok := td.lookup(name); ok {
		td.entries[j] = e
		return
	}
	td.appendEntry(e)
}

// checkWrite returns an error if writing an entry of kind kd named name into
// node is refused by its lock.
func checkWrite(op string, k Key, node *TensorDict, name string, kd kind) error {
	if !node.locked {
		return nil
	}
	j, ok := node.lookup(name)
	if !ok {
		return fmt.Errorf("tensordict: %s: key %v: cannot add a new entry: %w", op, k, ErrLocked)
	}
	if old := node.entries[j].kind; old != kd {
		return fmt.Errorf("tensordict: %s: key %v: cannot replace a %v by a %v: %w", op, k, old, kd, ErrLocked)
	}
	return nil
}

// hasPrefix reports whether shape starts with prefix.
func hasPrefix(shape, prefix []int) bool {
	if len(shape) < len(prefix) {
		return false
	}
	for i, d := range prefix {
		if shape[i] != d {
			return false
		}
	}
	return true
}

// shapeHasPrefix is hasPrefix(t.Shape(), prefix) without copying the shape.
func shapeHasPrefix(t *tensor.Tensor, prefix []int) bool {
	if t.Dim() < len(prefix) {
		return false
	}
	for i, d := range prefix {
		if t.Size(i) != d {
			return false
		}
	}
	return true
}

// Set stores the tensor v under k, creating missing nested levels (which take
// the batch size of their parent). v's leading dimensions must equal the
// batch size of the TensorDict that holds it. An existing entry named k is
// replaced; v is stored as is, not copied. On a locked TensorDict, Set may
// only replace an existing tensor leaf.
//
// On a locked TensorDict whose leaf k is memory-mapped (the result of
// Memmap or LoadMemmap), Set writes v into the mapping instead, as
// SetInPlace does, so the file changes as in Python tensordict; v must
// then have the leaf's shape (a different dtype is converted), and a
// tensor of another shape is refused with an error wrapping ErrLocked.
// Unlock first to replace the leaf by v itself.
func (td *TensorDict) Set(k Key, v *tensor.Tensor) error {
	if err := validKey("Set", k); err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("tensordict: Set: key %v: nil tensor", k)
	}
	node, depth, err := td.parentFor("Set", k)
	if err != nil {
		return err
	}
	if !shapeHasPrefix(v, node.batch) {
		return fmt.Errorf("tensordict: Set: key %v: tensor shape %v does not start with batch size %v", k, v.Shape(), node.batch)
	}
	if depth == len(k)-1 && node.locked {
		if err := checkWrite("Set", k, node, k[depth], kindTensor); err != nil {
			return err
		}
		if j, ok := node.lookup(k[depth]); ok && memmap.Is(node.entries[j].t) {
			return writeThrough(k, node.entries[j].t, v)
		}
	}
	if node, err = makeLevels("Set", k, node, depth); err != nil {
		return err
	}
	node.add(k[len(k)-1], entry{kind: kindTensor, t: v})
	return nil
}

// writeThrough is Set of v on the memory-mapped leaf dst of a locked
// TensorDict: v is copied into dst's mapping.
func writeThrough(k Key, dst, v *tensor.Tensor) error {
	if !slices.Equal(v.Shape(), dst.Shape()) {
		return fmt.Errorf("tensordict: Set: key %v: the leaf is memory-mapped and Set writes into its file, but the tensor's shape %v is not the leaf's %v: %w (Unlock to replace the leaf)",
			k, v.Shape(), dst.Shape(), ErrLocked)
	}
	return copyInto("Set", k, dst, v)
}

// copyInto copies v into the leaf dst named k, converting its dtype. A
// fault on a mapping (a file truncated by another process) is an error
// wrapping memmap.ErrFault.
func copyInto(op string, k Key, dst, v *tensor.Tensor) error {
	if err := mem.CatchFault(func() error {
		if v.DType() != dst.DType() {
			v = v.To(dst.DType())
		}
		return dst.CopyFrom(v)
	}); err != nil {
		return fmt.Errorf("tensordict: %s: key %v: %w", op, k, err)
	}
	return nil
}

// SetTD stores sub as the nested TensorDict k (the same object, not a copy),
// creating missing levels. sub's batch size must start with the batch size of
// the TensorDict that holds it.
func (td *TensorDict) SetTD(k Key, sub *TensorDict) error {
	if err := validKey("SetTD", k); err != nil {
		return err
	}
	if sub == nil {
		return fmt.Errorf("tensordict: SetTD: key %v: nil tensordict", k)
	}
	if sub == td {
		return fmt.Errorf("tensordict: SetTD: key %v: a tensordict cannot contain itself", k)
	}
	node, depth, err := td.parentFor("SetTD", k)
	if err != nil {
		return err
	}
	if !hasPrefix(sub.batch, node.batch) {
		return fmt.Errorf("tensordict: SetTD: key %v: batch size %v does not start with parent batch size %v", k, sub.batch, node.batch)
	}
	if sub.contains(td) {
		return fmt.Errorf("tensordict: SetTD: key %v: the tensordict would contain itself", k)
	}
	if depth == len(k)-1 {
		if err := checkWrite("SetTD", k, node, k[depth], kindTD); err != nil {
			return err
		}
	}
	if node, err = makeLevels("SetTD", k, node, depth); err != nil {
		return err
	}
	node.add(k[len(k)-1], entry{kind: kindTD, td: sub})
	return nil
}

// contains reports whether x is td or one of its nested TensorDicts.
func (td *TensorDict) contains(x *TensorDict) bool {
	if td == x {
		return true
	}
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD && e.td.contains(x) {
			return true
		}
	}
	return false
}

// SetNonTensor stores a non-tensor value under k, creating missing levels.
// v must be JSON-able: nil, a bool, a string, a number (not NaN or
// infinite), or a slice, array or string-keyed map of those. It is stored in
// canonical form: integers as int64 (uint64 above MaxInt64 as float64),
// floats as float64, slices as []any and maps as map[string]any, so a value
// read back with GetNonTensor, or after a consolidated round trip, is the
// same. Python tensordict stores such values as NonTensorData.
//
// v may also be a *NonTensorStack, one value per batch element: its shape
// must be the batch size of the TensorDict that will hold it (td's, or
// that of the nested level of k). A stack whose values are all equal is
// stored as the single value (see NonTensorStack).
func (td *TensorDict) SetNonTensor(k Key, v any) error {
	if err := validKey("SetNonTensor", k); err != nil {
		return err
	}
	var cv any
	var err error
	if s, ok := v.(*NonTensorStack); ok && s != nil {
		cv = fromElements(cloneStack(s).values, s.shape, cloneValue(representative(s)))
	} else if cv, err = canonical(v, 0); err != nil {
		return fmt.Errorf("tensordict: SetNonTensor: key %v: %w", k, err)
	}
	node, depth, err := td.parentFor("SetNonTensor", k)
	if err != nil {
		return err
	}
	if s, ok := cv.(*NonTensorStack); ok && !slices.Equal(s.shape, node.batch) {
		return fmt.Errorf("tensordict: SetNonTensor: key %v: NonTensorStack of shape %v, the batch size is %v", k, s.shape, node.batch)
	}
	if depth == len(k)-1 {
		if err := checkWrite("SetNonTensor", k, node, k[depth], kindNonTensor); err != nil {
			return err
		}
	}
	if node, err = makeLevels("SetNonTensor", k, node, depth); err != nil {
		return err
	}
	node.add(k[len(k)-1], entry{kind: kindNonTensor, v: cv})
	return nil
}

// SetInPlace copies v into the existing tensor leaf k, which keeps its
// storage (so a consolidated or memory-mapped TensorDict stays so). v must
// broadcast to the leaf's shape, as in torch's copy_; a different dtype is
// converted. It is allowed on a locked TensorDict.
func (td *TensorDict) SetInPlace(k Key, v *tensor.Tensor) error {
	dst, err := td.Get(k)
	if err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("tensordict: SetInPlace: key %v: nil tensor", k)
	}
	return copyInto("SetInPlace", k, dst, v)
}

// Del removes the entry k (of any kind). It returns an error wrapping
// ErrNotFound if there is none, and one wrapping ErrLocked if the
// TensorDict holding it is locked.
func (td *TensorDict) Del(k Key) error {
	node, j, err := td.find("Del", k)
	if err != nil {
		return err
	}
	if node.locked {
		return fmt.Errorf("tensordict: Del: key %v: %w", k, ErrLocked)
	}
	node.removeEntry(j)
	return nil
}

// SetBatchSize changes the batch size of td, and of its nested TensorDicts
// whose batch size equals td's, after checking that every entry fits.
func (td *TensorDict) SetBatchSize(shape ...int) error {
	if td == nil {
		return nilError("SetBatchSize")
	}
	for i, d := range shape {
		if d < 0 {
			return fmt.Errorf("tensordict: SetBatchSize: batch size %v: dimension %d is negative", shape, i)
		}
	}
	if err := td.checkBatch(nil, shape); err != nil {
		return fmt.Errorf("tensordict: SetBatchSize: %w", err)
	}
	td.setBatch(shape)
	return nil
}

// checkBatch returns an error naming the first entry (below prefix) that does
// not fit batch size shape.
func (td *TensorDict) checkBatch(prefix Key, shape []int) error {
	old := td.batch
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			if s := e.t.Shape(); !hasPrefix(s, shape) {
				return fmt.Errorf("key %v: tensor shape %v does not start with batch size %v", prefix.child(e.name), s, shape)
			}
		case kindTD:
			sub := e.td.batch
			if len(sub) == len(old) {
				if err := e.td.checkBatch(prefix.child(e.name), shape); err != nil {
					return err
				}
			} else if !hasPrefix(sub, shape) {
				return fmt.Errorf("key %v: batch size %v does not start with batch size %v", prefix.child(e.name), sub, shape)
			}
		}
	}
	return nil
}

// setBatch sets the batch size of td and of nested TensorDicts that shared
// its old batch size.
func (td *TensorDict) setBatch(shape []int) {
	td.edited()
	old := len(td.batch)
	td.batch = append(make([]int, 0, len(shape)), shape...)
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD && len(e.td.batch) == old {
			e.td.setBatch(shape)
		}
	}
}

// Lock forbids adding and removing entries of td and of every nested
// TensorDict; tensor leaves may still be replaced or written in place
// (SetInPlace). It returns td.
func (td *TensorDict) Lock() *TensorDict {
	if td == nil {
		return nil
	}
	td.setLocked(true)
	return td
}

// Unlock undoes Lock on td and every nested TensorDict. It returns td.
func (td *TensorDict) Unlock() *TensorDict {
	if td == nil {
		return nil
	}
	td.setLocked(false)
	return td
}

func (td *TensorDict) setLocked(v bool) {
	td.edited()
	td.locked = v
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD {
			e.td.setLocked(v)
		}
	}
}

// setLockedNode locks td alone, not its nested TensorDicts, for a
// builder that locks each node of a locked subtree itself: Lock of every
// locked node of a tree would lock the nodes below it once per locked
// node above them.
func (td *TensorDict) setLockedNode() {
	td.edited()
	td.locked = true
}

// IsLocked reports whether td is locked.
func (td *TensorDict) IsLocked() bool { return td != nil && td.locked }

// A node finds its entries by name through index, a map from names to
// positions in entries, once it has indexMin entries; smaller nodes, the
// common case, are searched in order, which is as fast and saves building a
// map for every node of every TensorDict received or rebuilt. Only writes
// create the map, so concurrent reads stay safe.

// indexMin is the number of entries from which a node keeps an index map.
const indexMin = 9

// lookup returns the position of the entry called name in td.entries.
func (td *TensorDict) lookup(name string) (int, bool) {
	if td.index != nil {
		j, ok := td.index[name]
		return j, ok
	}
	for i := range td.entries {
		if td.entries[i].name == name {
			return i, true
		}
	}
	return -1, false
}

// newIndex returns the index of a node that is being filled with n
// entries of distinct names, made with room for them all, or nil for a
// node that keeps none (see indexMin). The caller appends the entries
// itself, setting index[name] to each one's position, rather than through
// appendEntry, which would build the map when the node reaches indexMin
// entries and then grow it.
func newIndex(n int) map[string]int {
	if n < indexMin {
		return nil
	}
	return make(map[string]int, n)
}

// appendNew appends e, whose name td does not hold, to td, a node being
// filled whose index newIndex made.
func (td *TensorDict) appendNew(e entry) {
	td.edited()
	if td.index != nil {
		td.index[e.name] = len(td.entries)
	}
	td.entries = append(td.entries, e)
}

// ownIndex makes td's index its own, copying a shared one.
func (td *TensorDict) ownIndex() {
	if td.sharedIndex {
		td.index, td.sharedIndex = maps.Clone(td.index), false
	}
}

// appendEntry adds e, whose name td does not hold yet, after the others.
func (td *TensorDict) appendEntry(e entry) {
	td.edited()
	td.ownIndex()
	if n := len(td.entries); n == cap(td.entries) && n >= 256 {
		// Double a large node's entries where append would grow them
		// by a quarter: a node filled with n entries then copies about
		// n entries in all, not 4n.
		td.entries = append(make([]entry, 0, 2*n), td.entries...)
	}
	td.entries = append(td.entries, e)
	switch n := len(td.entries); {
	case td.index != nil:
		td.index[e.name] = n - 1
	case n >= indexMin:
		td.index = make(map[string]int, 2*n)
		for i := range td.entries {
			td.index[td.entries[i].name] = i
		}
	}
}

// removeEntry deletes entry j, keeping the others in order.
func (td *TensorDict) removeEntry(j int) {
	td.edited()
	td.ownIndex()
	name := td.entries[j].name
	copy(td.entries[j:], td.entries[j+1:])
	td.entries[len(td.entries)-1] = entry{}
	td.entries = td.entries[:len(td.entries)-1]
	if td.index == nil {
		return
	}
	delete(td.index, name)
	for i := j; i < len(td.entries); i++ {
		td.index[td.entries[i].name] = i
	}
}
