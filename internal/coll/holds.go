// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// Holds are the storages one transfer (a collective, a Send, an ISend)
// hands to MPI, each held (rawbytes.Hold) from before the transfer takes
// its bytes until MPI no longer reads or writes them: a Release meanwhile
// (tensor.Storage, memmap.Close) leaves the memory in place, and the end
// of the last hold frees it. Every transfer that gives MPI a storage's
// bytes holds the storage through Add and ends with End. Only storages
// whose release frees something are held: external ones (off-heap, memory
// maps) and the receive pool's (Reusable); the Go heap memory of any
// other stays reachable, and pinned under MPI, whatever its release. The
// zero value holds nothing.
type Holds struct {
	first *tensor.Storage
	more  []*tensor.Storage // beyond first: only a transfer of several storages allocates
}

// Add holds st for the transfer (nil: nothing), or returns an error
// wrapping tensor.ErrReleased if st was released.
func (h *Holds) Add(st *tensor.Storage) error {
	if st == nil || !(st.External() || st.Reusable()) {
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

// Empty reports whether h holds nothing.
func (h *Holds) Empty() bool { return h.first == nil }

// End ends h's holds once MPI no longer uses the storages: at once when
// the transfer ended without an error (every MPI operation it started
// has completed), else once every MPI operation in flight now has (those
// the transfer gave up at its context's end among them; see
// mpi.AfterInFlight). h is empty afterwards; a nil h holds nothing.
func (h *Holds) End(err error) {
	if h == nil || h.first == nil {
		return
	}
	if err != nil {
		held := *h
		mpi.AfterInFlight(held.unhold)
	} else {
		h.unhold()
	}
	*h = Holds{}
}

// unhold ends every hold of h at once.
func (h *Holds) unhold() {
	rawbytes.Unhold(h.first)
	for _, st := range h.more {
		rawbytes.Unhold(st)
	}
}
