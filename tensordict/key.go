package tensordict

import (
	"strings"

	"github.com/tdmpi/tdmpi/internal/codec"
)

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
