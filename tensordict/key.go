package tensordict

import (
	"strconv"
	"strings"
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
func (k Key) String() string {
	plain := len(k) > 0
	for _, p := range k {
		if p == "" || strings.ContainsAny(p, ". \"()\t\n,") {
			plain = false
			break
		}
	}
	if plain {
		return strings.Join(k, ".")
	}
	var b strings.Builder
	b.WriteByte('(')
	for i, p := range k {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(p))
	}
	b.WriteByte(')')
	return b.String()
}

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
