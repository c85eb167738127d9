package tensordict

import (
	"sort"
	"strings"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// KeysOption changes what Keys and Items list.
type KeysOption func(*keysConfig)

type keysConfig struct {
	nested     bool
	leavesOnly bool
	sorted     bool
}

// IncludeNested makes Keys and Items descend into nested TensorDicts and list
// their entries with full keys, depth first: a nested TensorDict is listed
// before its entries.
func IncludeNested() KeysOption { return func(c *keysConfig) { c.nested = true } }

// LeavesOnly makes Keys and Items list tensor leaves only, leaving out nested
// TensorDicts and non-tensor values (as Python tensordict's leaves_only does
// with NonTensorData).
func LeavesOnly() KeysOption { return func(c *keysConfig) { c.leavesOnly = true } }

// Sorted makes Keys and Items list keys sorted by their parts joined with
// ".", as Python tensordict's sort=True does, instead of in insertion order.
func Sorted() KeysOption { return func(c *keysConfig) { c.sorted = true } }

// Item is one entry listed by Items: a tensor leaf (Tensor set), a nested
// TensorDict (TD set) or a non-tensor value (IsNonTensor true, Value holds
// it).
type Item struct {
	Key    Key
	Tensor *tensor.Tensor // a tensor leaf
	TD     *TensorDict    // a nested TensorDict
	Value  any            // a non-tensor value, when IsNonTensor
	// IsNonTensor reports that the entry is a non-tensor value (which may be
	// nil, so Value alone cannot tell).
	IsNonTensor bool
}

// Keys returns the keys of td. By default it lists the top-level entries of
// every kind in insertion order; see IncludeNested, LeavesOnly and Sorted.
func (td *TensorDict) Keys(opts ...KeysOption) []Key {
	if td == nil {
		return nil
	}
	items := td.Items(opts...)
	out := make([]Key, len(items))
	for i, it := range items {
		out[i] = it.Key
	}
	return out
}

// Items returns the entries of td with their keys, chosen and ordered like
// Keys.
func (td *TensorDict) Items(opts ...KeysOption) []Item {
	if td == nil {
		return nil
	}
	var c keysConfig
	for _, o := range opts {
		o(&c)
	}
	var out []Item
	td.walkItems(nil, &c, &out)
	if c.sorted {
		sort.SliceStable(out, func(i, j int) bool {
			return strings.Join(out[i].Key, ".") < strings.Join(out[j].Key, ".")
		})
	}
	return out
}

func (td *TensorDict) walkItems(prefix Key, c *keysConfig, out *[]Item) {
	for i := range td.entries {
		e := &td.entries[i]
		k := prefix.child(e.name)
		switch e.kind {
		case kindTensor:
			*out = append(*out, Item{Key: k, Tensor: e.t})
		case kindNonTensor:
			if !c.leavesOnly {
				*out = append(*out, Item{Key: k, Value: e.v, IsNonTensor: true})
			}
		case kindTD:
			if !c.leavesOnly {
				*out = append(*out, Item{Key: k, TD: e.td})
			}
			if c.nested {
				e.td.walkItems(k, c, out)
			}
		}
	}
}

// walkLeaves calls fn for every tensor leaf, depth first in insertion order,
// with the node holding it and its index there. It stops at the first error.
// A nil td has no leaves.
func (td *TensorDict) walkLeaves(prefix Key, fn func(k Key, node *TensorDict, j int) error) error {
	if td == nil {
		return nil
	}
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindTensor:
			if err := fn(prefix.child(e.name), td, i); err != nil {
				return err
			}
		case kindTD:
			if err := e.td.walkLeaves(prefix.child(e.name), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Key names an entry of a TensorDict. A Key of one part names a top-level
// entry; a longer Key names an entry of a nested TensorDict, like the tuple
// keys ("a", "b") of Python tensordict. A Key must have at least one part.
type Key []string

// K returns the Key made of parts: K("a", "b") names entry "b" of the nested
// TensorDict "a".
func K(parts ...string) Key { return Key(parts) }

// String returns k for messages: the parts joined by "." (a.b.c), or, when a
// part is empty or holds a dot, quote or space, a Go-quoted tuple ("a.b", "c").
func (k Key) String() string { return codec.Key(k).String() }

// Equal reports whether k and o have the same parts.
func (k Key) Equal(o Key) bool {
	if len(k) != len(o) {
		return false
	}
	for i := range k {
		if k[i] != o[i] {
			return false
		}
	}
	return true
}

// Join returns the parts of k joined by sep, as FlattenKeys names entries.
func (k Key) Join(sep string) string { return strings.Join(k, sep) }

// child returns k extended by part, in a new slice.
func (k Key) child(part string) Key {
	out := make(Key, len(k)+1)
	copy(out, k)
	out[len(k)] = part
	return out
}
