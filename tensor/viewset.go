// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensor

import (
	"fmt"
	"unsafe"
)

// A viewSet is a list of contiguous views of one storage layout, checked
// once, that Over lays over other storages of that layout: the
// internal/tensorx.ViewSet that package tensordict's receives use.
type viewSet struct {
	like  []Tensor
	need  int   // bytes a storage must have
	align int   // the alignment the storage's memory needs
	bools []int // the views of dtype Bool
}

// newViewSet returns the viewSet of like's tensors (see
// internal/tensorx.NewViewSet).
func newViewSet(like []Tensor) (*viewSet, error) {
	v := &viewSet{like: append([]Tensor(nil), like...), align: 1}
	for i := range v.like {
		l := &v.like[i]
		if !l.IsContiguous() {
			return nil, fmt.Errorf("tensor: NewViewSet: tensor %d of shape %v has strides %v: not contiguous", i, l.shape(), l.strides())
		}
		a := align(l.dtype)
		if l.offset < 0 || l.offset%a != 0 {
			return nil, fmt.Errorf("tensor: NewViewSet: tensor %d, %v%v, at offset %d: not a multiple of %d", i, l.dtype, l.shape(), l.offset, a)
		}
		v.need = max(v.need, l.offset+l.NBytes())
		v.align = max(v.align, a)
		if l.dtype == Bool {
			v.bools = append(v.bools, i)
		}
		l.st = nil // v keeps no storage alive
	}
	return v, nil
}

// Len returns the number of views of v.
func (v *viewSet) Len() int { return len(v.like) }

// HasBools reports whether a view is of dtype Bool, whose bytes Over
// checks.
func (v *viewSet) HasBools() bool { return len(v.bools) > 0 }

// Over sets each dst[i] to a view of st laid out as v's view i: its dtype,
// shape, strides (shared with v's) and byte offset. It checks what
// FromStorage checks, in one step for all the views: that st is not
// released, that it holds every view and that its memory is aligned for
// every dtype, and that bool elements are 0 or 1. On error dst is
// unchanged. It panics if dst and v differ in length.
func (v *viewSet) Over(dst []Tensor, st *Storage) error {
	if len(dst) != len(v.like) {
		panic(fmt.Sprintf("tensor: ViewSet.Over: %d destinations for %d views", len(dst), len(v.like)))
	}
	b, err := st.liveBytes("ViewSet.Over")
	if err != nil {
		return err
	}
	if len(b) < v.need {
		return fmt.Errorf("tensor: ViewSet.Over: the views need %d bytes, storage has %d", v.need, len(b))
	}
	if len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(v.align) != 0 {
		return fmt.Errorf("tensor: ViewSet.Over: storage memory is not aligned to %d bytes", v.align)
	}
	for _, i := range v.bools {
		l := &v.like[i]
		if err := checkBools(b[l.offset : l.offset+l.NBytes()]); err != nil {
			return fmt.Errorf("tensor: ViewSet.Over: tensor %d: %w", i, err)
		}
	}
	// Field by field rather than dst[i] = v.like[i]: while the collector
	// marks, each pointer written costs a write barrier, and like's
	// storage pointer would be written only to be replaced.
	for i := range v.like {
		l, d := &v.like[i], &dst[i]
		d.dims, d.nd, d.dtype, d.offset, d.st = l.dims, l.nd, l.dtype, l.offset, st
	}
	return nil
}
