// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
import "C"

import (
	"unsafe"
)

// Comm is an MPI communicator. World and Self are predefined; Dup, Split and
// CreateGroup make new ones, which the caller releases with Free. Every
// communicator of this package returns errors (MPI_ERRORS_RETURN) instead of
// aborting the job.
//
// A Comm may be used from several goroutines at once (MPI_THREAD_MULTIPLE),
// except that Free must not run concurrently with any other use.
type Comm struct {
	h          C.MPI_Comm
	w          C.tdmpi_word // h as a word (see tdmpi_word in shim.h)
	rank, size int
	tagUB      int
	predefined bool
}

var (
	world = Comm{h: commWorld, w: C.tdmpi_comm_word(commWorld), predefined: true}
	self  = Comm{h: commSelf, w: C.tdmpi_comm_word(commSelf), predefined: true}
)

// World returns MPI_COMM_WORLD. It is usable after Init.
func World() *Comm { return &world }

// Self returns MPI_COMM_SELF. It is usable after Init.
func Self() *Comm { return &self }

// setup sets MPI_ERRORS_RETURN on c and caches its rank, size and tag bound.
func (c *Comm) setup() error {
	if err := newError("MPI_Comm_set_errhandler", C.MPI_Comm_set_errhandler(c.h, errorsRet)); err != nil {
		return err
	}
	var r, s, ub C.int
	if err := newError("MPI_Comm_rank", C.MPI_Comm_rank(c.h, &r)); err != nil {
		return err
	}
	if err := newError("MPI_Comm_size", C.MPI_Comm_size(c.h, &s)); err != nil {
		return err
	}
	if err := newError("MPI_Comm_get_attr", C.tdmpi_tag_ub(c.h, &ub)); err != nil {
		return err
	}
	c.rank, c.size, c.tagUB = int(r), int(s), int(ub)
	if c.tagUB < 0 {
		// The attribute is only sure to be on World (set up first); the
		// bound is the same for every communicator of the process.
		c.tagUB = max(world.tagUB, 32767)
	}
	return nil
}

// newComm wraps a communicator MPI just created. On error it frees h.
func newComm(h C.MPI_Comm) (*Comm, error) {
	c := &Comm{h: h, w: C.tdmpi_comm_word(h)}
	if err := c.setup(); err != nil {
		C.MPI_Comm_free(&c.h)
		return nil, err
	}
	return c, nil
}

// handle returns c's MPI handle, or an error naming op if c is nil, freed,
// or MPI is not initialised.
func (c *Comm) handle(op string) (C.MPI_Comm, error) {
	if c == nil || c.h == commNull {
		return commNull, argError(op, C.MPI_ERR_COMM, "nil or freed communicator")
	}
	if c.size == 0 {
		return commNull, argError(op, C.MPI_ERR_COMM, "MPI is not initialised")
	}
	return c.h, nil
}

// Rank returns the rank of the calling process in c. It panics if c is nil
// or freed, or MPI is not initialised.
func (c *Comm) Rank() int {
	c.mustBeLive("Rank")
	return c.rank
}

// Size returns the number of processes in c. It panics if c is nil or
// freed, or MPI is not initialised.
func (c *Comm) Size() int {
	c.mustBeLive("Size")
	return c.size
}

// TagUB returns the largest tag value c accepts (the MPI_TAG_UB attribute).
// It panics if c is nil or freed, or MPI is not initialised.
func (c *Comm) TagUB() int {
	c.mustBeLive("TagUB")
	return c.tagUB
}

func (c *Comm) mustBeLive(name string) {
	if c == nil || c.h == commNull {
		panic("mpi: " + name + " of nil or freed communicator")
	}
	if c.size == 0 {
		panic("mpi: " + name + " before Init")
	}
}

// Dup duplicates c, as MPI_Comm_dup: the new communicator has the same
// processes and ranks but its own message space. It is collective over c.
func (c *Comm) Dup() (*Comm, error) {
	h, err := c.handle("MPI_Comm_dup")
	if err != nil {
		return nil, err
	}
	defer callCommDup.enter().leave()
	var n C.MPI_Comm
	if err := newError("MPI_Comm_dup", C.MPI_Comm_dup(h, &n)); err != nil {
		return nil, err
	}
	return newComm(n)
}

// Split partitions c by color, as MPI_Comm_split; processes with the same
// color form a new communicator, ranked by key and then by rank in c. A
// process giving color Undefined joins none and gets (nil, nil). Split is
// collective over c.
func (c *Comm) Split(color, key int) (*Comm, error) {
	h, err := c.handle("MPI_Comm_split")
	if err != nil {
		return nil, err
	}
	if color != Undefined && (color < 0 || color > maxInt32) {
		return nil, argError("MPI_Comm_split", C.MPI_ERR_ARG, "color %d is neither Undefined nor in [0, %d]", color, maxInt32)
	}
	if key < -maxInt32-1 || key > maxInt32 {
		return nil, argError("MPI_Comm_split", C.MPI_ERR_ARG, "key %d out of int32 range", key)
	}
	defer callCommSplit.enter().leave()
	var n C.MPI_Comm
	if err := newError("MPI_Comm_split", C.MPI_Comm_split(h, C.int(color), C.int(key), &n)); err != nil {
		return nil, err
	}
	if n == commNull {
		return nil, nil
	}
	return newComm(n)
}

const maxInt32 = 1<<31 - 1

// SplitShared partitions c into the processes that can share memory, as
// MPI_Comm_split_type with MPI_COMM_TYPE_SHARED: the ranks of c on each
// node (as the MPI library sees nodes), in their order in c. It is
// collective over c.
func (c *Comm) SplitShared() (*Comm, error) {
	const op = "MPI_Comm_split_type"
	h, err := c.handle(op)
	if err != nil {
		return nil, err
	}
	defer callCommSplitType.enter().leave()
	var n C.MPI_Comm
	if err := newError(op, C.MPI_Comm_split_type(h, C.MPI_COMM_TYPE_SHARED, C.int(c.rank), C.MPI_INFO_NULL, &n)); err != nil {
		return nil, err
	}
	return newComm(n)
}

// CreateGroup makes a communicator of the processes of c with the given
// ranks (in c), as MPI_Comm_create_group: rank i of the result is ranks[i].
// Only those processes call it, all with the same ranks and tag; tag tells
// apart concurrent creations. The caller must be in ranks.
func (c *Comm) CreateGroup(ranks []int, tag int) (*Comm, error) {
	const op = "MPI_Comm_create_group"
	h, err := c.handle(op)
	if err != nil {
		return nil, err
	}
	if len(ranks) == 0 {
		return nil, argError(op, C.MPI_ERR_GROUP, "empty rank list")
	}
	if tag < 0 || tag > c.tagUB {
		return nil, argError(op, C.MPI_ERR_TAG, "tag %d out of range [0, %d]", tag, c.tagUB)
	}
	cr := make([]C.int, len(ranks))
	seen := make(map[int]bool, len(ranks))
	member := false
	for i, r := range ranks {
		if r < 0 || r >= c.size {
			return nil, argError(op, C.MPI_ERR_RANK, "rank %d out of range [0, %d)", r, c.size)
		}
		if seen[r] {
			return nil, argError(op, C.MPI_ERR_RANK, "rank %d listed twice", r)
		}
		seen[r] = true
		member = member || r == c.rank
		cr[i] = C.int(r)
	}
	if !member {
		return nil, argError(op, C.MPI_ERR_GROUP, "calling rank %d is not in %v", c.rank, ranks)
	}
	defer callCommCreateGroup.enter().leave()
	var g, sub C.MPI_Group
	if err := newError("MPI_Comm_group", C.MPI_Comm_group(h, &g)); err != nil {
		return nil, err
	}
	defer C.MPI_Group_free(&g)
	if err := newError("MPI_Group_incl", C.MPI_Group_incl(g, C.int(len(cr)), unsafe.SliceData(cr), &sub)); err != nil {
		return nil, err
	}
	defer C.MPI_Group_free(&sub)
	var n C.MPI_Comm
	if err := newError(op, C.MPI_Comm_create_group(h, sub, C.int(tag), &n)); err != nil {
		return nil, err
	}
	return newComm(n)
}

// TranslateRank returns the rank in to of the process with rank rank in c,
// or Undefined if that process is not in to.
func (c *Comm) TranslateRank(rank int, to *Comm) (int, error) {
	const op = "MPI_Group_translate_ranks"
	h, err := c.handle(op)
	if err != nil {
		return 0, err
	}
	th, err := to.handle(op)
	if err != nil {
		return 0, err
	}
	if rank < 0 || rank >= c.size {
		return 0, argError(op, C.MPI_ERR_RANK, "rank %d out of range [0, %d)", rank, c.size)
	}
	var g1, g2 C.MPI_Group
	if err := newError("MPI_Comm_group", C.MPI_Comm_group(h, &g1)); err != nil {
		return 0, err
	}
	defer C.MPI_Group_free(&g1)
	if err := newError("MPI_Comm_group", C.MPI_Comm_group(th, &g2)); err != nil {
		return 0, err
	}
	defer C.MPI_Group_free(&g2)
	in, out := C.int(rank), C.int(0)
	if err := newError(op, C.MPI_Group_translate_ranks(g1, 1, &in, g2, &out)); err != nil {
		return 0, err
	}
	return int(out), nil
}

// Free releases a communicator made by Dup, Split or CreateGroup, as
// MPI_Comm_free; it is collective over c. Freeing a freed or nil
// communicator does nothing; freeing World or Self returns an error.
// Communicators are never freed by finalizers: call Free before Finalize.
func (c *Comm) Free() error {
	if c == nil || c.h == commNull {
		return nil
	}
	if c.predefined {
		return argError("MPI_Comm_free", C.MPI_ERR_COMM, "cannot free a predefined communicator")
	}
	defer callCommFree.enter().leave()
	err := newError("MPI_Comm_free", C.MPI_Comm_free(&c.h))
	c.h, c.w, c.size = commNull, C.tdmpi_comm_word(commNull), 0
	return err
}

// Barrier blocks until every process of c has called it.
func (c *Comm) Barrier() error {
	h, err := c.handle("MPI_Barrier")
	if err != nil {
		return err
	}
	defer callBarrier.enter().leave()
	return newError("MPI_Barrier", C.MPI_Barrier(h))
}
