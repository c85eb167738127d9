// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensorx

import (
	"github.com/tdmpi/tdmpi/internal/tensorx/hook"
	"github.com/tdmpi/tdmpi/tensor"
)

// The functions of package tensor, typed (see the package documentation).
var (
	fromStorageInto = hook.FromStorageInto.(func(*tensor.Tensor, []int, tensor.DType, *tensor.Storage, int, ...int) error)
	newViewSet      = hook.NewViewSet.(func([]tensor.Tensor) (any, error))
	reusable        = hook.Reusable.(func(*tensor.Storage) bool)
)

// FromStorageInto is tensor.FromStorage for a caller that builds many
// views at once (a TensorDict received from a peer, say) and allocates
// them together: it sets *t, which must not be in use, to the view, with
// its shape and strides in dims when dims holds 2*len(shape) ints and
// shape is not empty (the tensor then owns them), else in a new slice. It
// returns FromStorage's errors, leaving *t unchanged.
func FromStorageInto(t *tensor.Tensor, dims []int, dt tensor.DType, st *tensor.Storage, off int, shape ...int) error {
	return fromStorageInto(t, dims, dt, st, off, shape...)
}

// A ViewSet is a list of contiguous views of one storage layout, checked
// once, that Over lays over other storages of that layout: a receiver
// that makes the same views over a new storage again and again (a
// TensorDict received from a peer) checks each view's shape and offset
// once, not at every receive. A ViewSet is safe for concurrent use.
type ViewSet interface {
	// Len returns the number of views.
	Len() int
	// HasBools reports whether a view is of dtype Bool, whose bytes Over
	// checks.
	HasBools() bool
	// Over sets each dst[i] to a view of st laid out as view i: its
	// dtype, shape, strides (shared with the set's) and byte offset. It
	// checks what tensor.FromStorage checks, in one step for all the
	// views: that st is not released, that it holds every view and that
	// its memory is aligned for every dtype, and that bool elements are 0
	// or 1. On error dst is unchanged. It panics if dst and the set differ
	// in length.
	Over(dst []tensor.Tensor, st *tensor.Storage) error
}

// NewViewSet returns the ViewSet of like's tensors, which may view any
// storage, or an error if one is not contiguous or its byte offset is
// negative or not a multiple of its dtype's alignment. The set keeps no
// storage alive.
func NewViewSet(like []tensor.Tensor) (ViewSet, error) {
	v, err := newViewSet(like)
	if err != nil {
		return nil, err
	}
	return v.(ViewSet), nil
}

// Reusable reports whether st's memory belongs to tdmpi's receive pool:
// the storage of a received or consolidated TensorDict, which the pool
// takes back once st is released and nothing references the memory.
func Reusable(st *tensor.Storage) bool { return reusable(st) }
