package codec

import (
	"strconv"
	"strings"
)

// Key is the key of an entry, part by part: the neutral form of
// tensordict.Key, which converts to and from it.
type Key []string

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

// child returns k extended by part, in a new slice.
func (k Key) child(part string) Key {
	out := make(Key, len(k)+1)
	copy(out, k)
	out[len(k)] = part
	return out
}

// CompareKeys orders keys part by part, which is tensordict's sorted
// depth-first order: a nested TensorDict's leaves come where its name sorts
// among its siblings, and a key comes before the keys it is a prefix of.
func CompareKeys(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}
