package tensor

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// alloc returns a new contiguous tensor of dtype dt and the given shape on
// the Go heap, zeroed if zero is set (otherwise the caller writes every
// element before anything reads them), or an error naming op if the shape
// is bad or the tensor would not fit (wrapping ErrNoMemory).
func alloc(op string, dt DType, shape []int, zero bool) (*Tensor, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("tensor: %s: invalid dtype %v", op, dt)
	}
	nb, err := NBytesOf(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("tensor: %s: %v result: %w", op, dt, err)
	}
	if err := mem.CheckAvailable(int64(nb)); err != nil {
		return nil, fmt.Errorf("tensor: %s: %v result of shape %v: %w", op, dt, shape, err)
	}
	var st *Storage
	if zero {
		st = NewStorage(nb)
	} else {
		st = newStorage(mem.AllocUninit(nb)) // new heap memory: no parent
	}
	return newTensor(dt, contiguousDims(shape), 0, st), nil
}

// mustAlloc is alloc for the operations that return no error: it panics
// with alloc's error, an error value that wraps ErrNoMemory when the
// tensor would not fit (see catchNoMemory).
func mustAlloc(op string, dt DType, shape []int, zero bool) *Tensor {
	t, err := alloc(op, dt, shape, zero)
	if err != nil {
		panic(err)
	}
	return t
}

// catchNoMemory, deferred by an operation that returns an error, turns a
// panic of mustAlloc for a tensor that would not fit (a temporary made by
// To, Contiguous or Full on the way) into that operation's error. Other
// panics go on.
func catchNoMemory(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(error); ok && errors.Is(e, ErrNoMemory) {
		*err = e
		return
	}
	panic(r)
}

// New returns a contiguous tensor of zeros of dtype dt and the given shape,
// like Zeros, or an error where Zeros panics: an invalid dtype, a negative
// dimension, or a tensor that would not fit (wrapping ErrNoMemory).
func New(dt DType, shape ...int) (*Tensor, error) {
	return alloc("New", dt, shape, true)
}

// ContiguousChecked is Contiguous with an error where Contiguous panics: a
// copy that would not fit (wrapping ErrNoMemory), as that of a large
// Expand result, or a released storage.
func (t *Tensor) ContiguousChecked() (c *Tensor, err error) {
	if err := t.st.checkLive("Contiguous"); err != nil {
		return nil, err
	}
	if t.IsContiguous() {
		return t, nil
	}
	out, err := alloc("Contiguous", t.dtype, t.shape(), false)
	if err != nil {
		return nil, err
	}
	rawCopy(out, t)
	return out, nil
}
