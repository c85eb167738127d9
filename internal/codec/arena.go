package codec

// arena hands out slices of T cut from shared chunks, so that the many
// small slices of a decoded metadata tree (shapes, leaves, children) cost a
// few allocations in all. A chunk is never reallocated once slices of it
// are handed out; a full arena starts a new chunk twice as large.
type arena[T any] struct{ buf []T }

// reserve makes room for n more elements in the current chunk.
func (a *arena[T]) reserve(n int) {
	if a.buf != nil && cap(a.buf)-len(a.buf) >= n {
		return
	}
	a.buf = make([]T, 0, max(n, 2*cap(a.buf), 8))
}

// take returns a copy of src in the arena, with no room to grow in place.
func (a *arena[T]) take(src []T) []T {
	a.reserve(len(src))
	i := len(a.buf)
	a.buf = append(a.buf, src...)
	return a.buf[i:len(a.buf):len(a.buf)]
}

// one returns a pointer to a new zero element.
func (a *arena[T]) one() *T {
	a.reserve(1)
	a.buf = a.buf[:len(a.buf)+1]
	return &a.buf[len(a.buf)-1]
}

// reserve returns s with room for n more elements. It doubles the capacity
// when s must grow, where append grows a large slice by a quarter: a
// slice grown element by element to m elements, as the integers of a
// large tree are, has then been copied about m elements in all, not about
// 4m.
func reserve[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	return append(make([]T, 0, max(2*cap(s), len(s)+n)), s...)
}
