package tensordict

import (
	"cmp"
	"slices"
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
		slices.SortStableFunc(out, func(a, b Item) int { return compareJoined(a.Key, b.Key) })
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

// compareJoined compares a and b as strings.Compare compares their parts
// joined with ".", without joining them (Sorted would otherwise join two
// keys for every comparison).
func compareJoined(a, b Key) int {
	var ra, rb joinedReader
	ra.k, rb.k = a, b
	for {
		ca, oka := ra.next()
		cb, okb := rb.next()
		switch {
		case !oka || !okb:
			return cmp.Compare(b2i(oka), b2i(okb))
		case ca != cb:
			return cmp.Compare(ca, cb)
		}
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// joinedReader reads the parts of k joined with "." byte by byte.
type joinedReader struct {
	k    Key
	part int    // the part being read, 1-based (0: none yet)
	rest string // what is left of it
}

// next returns the next byte, or ok false at the end.
func (r *joinedReader) next() (c byte, ok bool) {
	for len(r.rest) == 0 {
		if r.part >= len(r.k) {
			return 0, false
		}
		r.rest = r.k[r.part]
		r.part++
		if r.part > 1 {
			return '.', true
		}
	}
	c, r.rest = r.rest[0], r.rest[1:]
	return c, true
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
