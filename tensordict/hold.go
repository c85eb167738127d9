// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/tensor"
)

// holds are the storages one transfer hands to MPI (see coll.Holds).
type holds = coll.Holds

// holding runs f, a transfer that gives MPI the bytes of st (nil: none),
// with st held, and returns f's error (see holds).
func holding(st *tensor.Storage, f func() error) error {
	var h holds
	if err := h.Add(st); err != nil {
		return err
	}
	err := f()
	h.End(err)
	return err
}

// hold holds, in h, the storages of s's TensorDict that a transfer may give
// MPI: its consolidated storage, or every leaf's.
func (s *p2pState) hold(h *holds) error {
	if s.st != nil {
		return h.Add(s.st)
	}
	for i := range s.leaves {
		if err := h.Add(s.leaves[i].t.Storage()); err != nil {
			h.End(nil) // nothing was given to MPI
			return fmt.Errorf("key %v: %w", s.leaves[i].key, err)
		}
	}
	return nil
}

// holdForISend holds the storages of s's TensorDict for an ISend (see
// hold), in holds of their own that its Pending keeps, or returns nil when
// there are none to hold.
func (s *p2pState) holdForISend() (*holds, error) {
	h := new(holds)
	if err := s.hold(h); err != nil {
		return nil, err
	}
	if h.Empty() {
		return nil, nil
	}
	return h, nil
}
