// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/tensor"
)

// holds are the storages one transfer hands to MPI, each held
// (rawbytes.Hold) from before the transfer takes its bytes until MPI no
// longer reads or writes them: a Release meanwhile (tensor.Storage,
// memmap.Close) leaves the memory in place, and the end of the last hold
// frees it. Every transfer that gives MPI a storage's bytes holds the
// storage through add (or holding) and ends with end. Only storages whose
// release frees something are held: external ones (off-heap, memory
// maps) and the receive pool's (Reusable); the Go heap memory of any
// other stays reachable, and pinned under MPI, whatever its release.
type holds struct {
	first *tensor.Storage
	more  []*tensor.Storage // beyond first: only a transfer of several storages allocates
}

// add holds st for the transfer (nil: nothing), or returns an error
// wrapping tensor.ErrReleased if st was released.
func (h *holds) add(st *tensor.Storage) error {
	if st == nil || !(st.External() || tensorx.Reusable(st)) {
		return nil
	}
	if st == h.first || (len(h.more) > 0 && h.more[len(h.more)-1] == st) {
		return nil // the leaves of one storage, one after another
	}
	if !rawbytes.Hold(st) {
		return fmt.Errorf("a storage of %d bytes: %w", st.Len(), tensor.ErrReleased)
	}
	if h.first == nil {
		h.first = st
	} else {
		h.more = append(h.more, st)
	}
	return nil
}

// empty reports whether h holds nothing.
func (h *holds) empty() bool { return h.first == nil }

// end ends h's holds once MPI no longer uses the storages: at once when
// the transfer ended without an error (every MPI operation it started
// has completed), else once every MPI operation in flight now has (those
// the transfer gave up at its context's end among them; see
// mpix.AfterInFlight). h is empty afterwards; a nil h holds nothing.
func (h *holds) end(err error) {
	if h == nil || h.first == nil {
		return
	}
	if err != nil {
		held := *h
		mpix.AfterInFlight(held.unhold)
	} else {
		h.unhold()
	}
	*h = holds{}
}

// unhold ends every hold of h at once.
func (h *holds) unhold() {
	rawbytes.Unhold(h.first)
	for _, st := range h.more {
		rawbytes.Unhold(st)
	}
}

// holding runs f, a transfer that gives MPI the bytes of st (nil: none),
// with st held, and returns f's error (see holds).
func holding(st *tensor.Storage, f func() error) error {
	var h holds
	if err := h.add(st); err != nil {
		return err
	}
	err := f()
	h.end(err)
	return err
}

// hold holds, in h, the storages of s's TensorDict that a transfer may give
// MPI: its consolidated storage, or every leaf's.
func (s *p2pState) hold(h *holds) error {
	if s.st != nil {
		return h.add(s.st)
	}
	for i := range s.leaves {
		if err := h.add(s.leaves[i].t.Storage()); err != nil {
			h.end(nil) // nothing was given to MPI
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
	if h.empty() {
		return nil, nil
	}
	return h, nil
}

// holdLeaves holds, in cl.held, the storages of the tensor leaves that the
// collective's steps give MPI.
func (cl *coll) holdLeaves(leaves []Item) error {
	for _, it := range leaves {
		if it.Tensor == nil {
			continue
		}
		if err := cl.held.add(it.Tensor.Storage()); err != nil {
			return fmt.Errorf("key %v: %w", it.Key, err)
		}
	}
	return nil
}
