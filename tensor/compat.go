// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensor

// The old names of what moved to internal/tensorx, until the callers move.

type ViewSet = viewSet

func NewViewSet(like []Tensor) (*ViewSet, error) { return newViewSet(like) }

func FromStorageInto(t *Tensor, dims []int, dt DType, st *Storage, off int, shape ...int) error {
	return fromStorageInto(t, dims, dt, st, off, shape...)
}

func (s *Storage) Reusable() bool { return s.reusable }
