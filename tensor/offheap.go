package tensor

// offHeap is the Owner of storage made by NewOffHeapStorage.
type offHeap struct{}

// IsOffHeap reports whether s was made by NewOffHeapStorage.
func (s *Storage) IsOffHeap() bool {
	_, ok := s.owner.(offHeap)
	return ok
}

// EmptyOffHeap returns a zeroed contiguous tensor of dtype dt and the given
// shape in new off-heap storage (see NewOffHeapStorage). The caller must
// release it with t.Storage().Release() when done. It returns an error for a
// bad dtype or shape, or if the mapping fails.
func EmptyOffHeap(dt DType, shape ...int) (*Tensor, error) {
	nb, err := NBytesOf(dt, shape)
	if err != nil {
		return nil, err
	}
	st, err := NewOffHeapStorage(nb)
	if err != nil {
		return nil, err
	}
	return FromStorage(dt, st, 0, shape...)
}
