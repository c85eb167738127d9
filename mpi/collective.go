// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
// #cgo noescape tdmpi_bcast
// #cgo nocallback tdmpi_bcast
import "C"

import "unsafe"

func (c *Comm) rootArgs(op string, root int) (C.MPI_Comm, error) {
	h, err := c.handle(op)
	if err != nil {
		return h, err
	}
	if root < 0 || root >= c.size {
		return h, argError(op, C.MPI_ERR_ROOT, "root %d out of range [0, %d)", root, c.size)
	}
	return h, nil
}

// Bcast sends buf from root to every other process of c, as MPI_Bcast.
// Every process passes a buffer of the same length. Any length works:
// beyond 2^31-1 elements a derived datatype describes the buffer.
func Bcast[T Scalar](c *Comm, buf []T, root int) error {
	const op = "MPI_Bcast"
	h, err := c.rootArgs(op, root)
	if err != nil {
		return err
	}
	b := bufOf(buf)
	dt, n, derived, err := b.dtype(op)
	if err != nil {
		return err
	}
	defer callBcast.enter().leave()
	err = newError(op, C.tdmpi_bcast(b.mem(), n, dt, C.int(root), h))
	freeType(dt, derived)
	return err
}

// blockLen returns the per-rank block length of a collective whose
// all-ranks buffer (named which) has whole elements and whose one-rank
// buffer has part: part itself, checked against whole, or with inplace
// whole/Size(), which must divide evenly.
func (c *Comm) blockLen(op, which string, whole, part int, inplace bool) (int, error) {
	if inplace {
		if whole%c.size != 0 {
			return 0, argError(op, C.MPI_ERR_BUFFER, "in place: %s buffer of %d elements is not a multiple of size %d", which, whole, c.size)
		}
		return whole / c.size, nil
	}
	if whole != part*c.size {
		return 0, argError(op, C.MPI_ERR_BUFFER, "%s buffer has %d elements, need %d×%d", which, whole, c.size, part)
	}
	return part, nil
}

// Gather collects len(send) elements from every process of c into recv at
// root, rank i's block at recv[i*len(send):], as MPI_Gather. At root, recv
// must have Size()*len(send) elements; elsewhere it is ignored.
func Gather[T Scalar](c *Comm, send, recv []T, root int) error {
	return gather(c, send, recv, root, false)
}

// GatherInPlace is Gather with one buffer: at root, buf is the receive
// buffer, whose block of root already holds root's contribution
// (MPI_IN_PLACE); on the other processes, buf is the block they send.
func GatherInPlace[T Scalar](c *Comm, buf []T, root int) error {
	return gather(c, buf, buf, root, true)
}

func gather[T Scalar](c *Comm, send, recv []T, root int, inplace bool) error {
	const op = "MPI_Gather"
	h, err := c.rootArgs(op, root)
	if err != nil {
		return err
	}
	inplace = inplace && c.rank == root
	n := len(send)
	if c.rank == root {
		if n, err = c.blockLen(op, "receive", len(recv), n, inplace); err != nil {
			return err
		}
	}
	cn, err := count32(op, n)
	if err != nil {
		return err
	}
	defer callGather.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_gather(sb.mem(), cbool(inplace), cn, rb.mem(), cn, datatypes[sb.k], C.int(root), h))
}

// Allgather collects len(send) elements from every process of c into recv
// on every process, rank i's block at recv[i*len(send):], as MPI_Allgather.
// recv must have Size()*len(send) elements.
func Allgather[T Scalar](c *Comm, send, recv []T) error {
	return allgather(c, send, recv, false)
}

// AllgatherInPlace is Allgather with one buffer: buf is the receive buffer
// of Size() equal blocks, each process's own block already in place
// (MPI_IN_PLACE).
func AllgatherInPlace[T Scalar](c *Comm, buf []T) error {
	return allgather(c, buf, buf, true)
}

func allgather[T Scalar](c *Comm, send, recv []T, inplace bool) error {
	const op = "MPI_Allgather"
	h, err := c.handle(op)
	if err != nil {
		return err
	}
	n, err := c.blockLen(op, "receive", len(recv), len(send), inplace)
	if err != nil {
		return err
	}
	cn, err := count32(op, n)
	if err != nil {
		return err
	}
	defer callAllgather.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_allgather(sb.mem(), cbool(inplace), cn, rb.mem(), cn, datatypes[sb.k], h))
}

// Scatter sends block i of send, send[i*len(recv):(i+1)*len(recv)], from
// root to rank i of c, as MPI_Scatter. At root, send must have
// Size()*len(recv) elements; elsewhere it is ignored.
func Scatter[T Scalar](c *Comm, send, recv []T, root int) error {
	return scatter(c, send, recv, root, false)
}

// ScatterInPlace is Scatter with one buffer: at root, buf is the send
// buffer, and root's own block stays in it (MPI_IN_PLACE); on the other
// processes, buf receives their block.
func ScatterInPlace[T Scalar](c *Comm, buf []T, root int) error {
	return scatter(c, buf, buf, root, true)
}

func scatter[T Scalar](c *Comm, send, recv []T, root int, inplace bool) error {
	const op = "MPI_Scatter"
	h, err := c.rootArgs(op, root)
	if err != nil {
		return err
	}
	inplace = inplace && c.rank == root
	n := len(recv)
	if c.rank == root {
		if n, err = c.blockLen(op, "send", len(send), n, inplace); err != nil {
			return err
		}
	}
	cn, err := count32(op, n)
	if err != nil {
		return err
	}
	defer callScatter.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_scatter(sb.mem(), cn, rb.mem(), cbool(inplace), cn, datatypes[sb.k], C.int(root), h))
}

// Alltoall sends block j of send to rank j and receives rank j's block into
// block j of recv, on every process of c, as MPI_Alltoall. send and recv
// have the same length, a multiple of Size().
func Alltoall[T Scalar](c *Comm, send, recv []T) error {
	return alltoall(c, send, recv, false)
}

// AlltoallInPlace is Alltoall with one buffer: block j of buf is sent to
// rank j and replaced by rank j's block (MPI_IN_PLACE).
func AlltoallInPlace[T Scalar](c *Comm, buf []T) error {
	return alltoall(c, buf, buf, true)
}

func alltoall[T Scalar](c *Comm, send, recv []T, inplace bool) error {
	const op = "MPI_Alltoall"
	h, err := c.handle(op)
	if err != nil {
		return err
	}
	if len(send) != len(recv) {
		return argError(op, C.MPI_ERR_BUFFER, "send buffer has %d elements, receive buffer %d", len(send), len(recv))
	}
	if len(recv)%c.size != 0 {
		return argError(op, C.MPI_ERR_BUFFER, "buffer of %d elements is not a multiple of size %d", len(recv), c.size)
	}
	cn, err := count32(op, len(recv)/c.size)
	if err != nil {
		return err
	}
	defer callAlltoall.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_alltoall(sb.mem(), cbool(inplace), cn, rb.mem(), datatypes[rb.k], h))
}

// vlayout checks per-rank counts and displacements (in elements) against a
// buffer of length n and converts them for MPI. nil displs means packed
// blocks in rank order.
func (c *Comm) vlayout(op, what string, counts, displs []int, n int) (cc, cd []C.int, err error) {
	if len(counts) != c.size {
		return nil, nil, argError(op, C.MPI_ERR_COUNT, "%s: %d counts for %d ranks", what, len(counts), c.size)
	}
	if displs != nil && len(displs) != c.size {
		return nil, nil, argError(op, C.MPI_ERR_ARG, "%s: %d displacements for %d ranks", what, len(displs), c.size)
	}
	cc, cd = make([]C.int, c.size), make([]C.int, c.size)
	off := 0
	for i, k := range counts {
		d := off
		if displs != nil {
			d = displs[i]
		}
		if k < 0 || k > maxInt32 || d < 0 || d > maxInt32 || d+k > n {
			return nil, nil, argError(op, C.MPI_ERR_COUNT, "%s: rank %d block [%d, %d+%d) outside buffer of %d elements", what, i, d, d, k, n)
		}
		cc[i], cd[i] = C.int(k), C.int(d)
		off = d + k
	}
	return cc, cd, nil
}

// Gatherv collects len(send) elements from each process of c into recv at
// root, rank i's block at recv[displs[i]:displs[i]+counts[i]], as
// MPI_Gatherv. counts and displs (in elements) matter at root only; nil
// displs packs the blocks in rank order.
func Gatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return gatherv(c, send, recv, counts, displs, root, false)
}

// GathervInPlace is Gatherv with one buffer: at root, buf is the receive
// buffer, whose block of root already holds root's contribution
// (MPI_IN_PLACE); on the other processes, buf is the block they send.
func GathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) error {
	return gatherv(c, buf, buf, counts, displs, root, true)
}

// gathervArgs checks the arguments of Gatherv and Igatherv.
func gathervArgs(c *Comm, op string, nsend, nrecv int, counts, displs []int, root int, inplace bool) (h C.MPI_Comm, sn C.int, cc, cd []C.int, err error) {
	if h, err = c.rootArgs(op, root); err != nil {
		return
	}
	if sn, err = count32(op, nsend); err != nil {
		return
	}
	if c.rank == root {
		if cc, cd, err = c.vlayout(op, "receive", counts, displs, nrecv); err != nil {
			return
		}
		if !inplace && int(cc[c.rank]) != nsend {
			err = argError(op, C.MPI_ERR_COUNT, "root sends %d elements but counts[%d] is %d", nsend, c.rank, cc[c.rank])
		}
	}
	return
}

func gatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, root int, inplace bool) error {
	const op = "MPI_Gatherv"
	inplace = inplace && c != nil && c.rank == root
	h, sn, cc, cd, err := gathervArgs(c, op, len(send), len(recv), counts, displs, root, inplace)
	if err != nil {
		return err
	}
	defer callGatherv.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_gatherv(sb.mem(), cbool(inplace), sn, rb.mem(), cptr(cc), cptr(cd), datatypes[sb.k], C.int(root), h))
}

// Allgatherv collects len(send) elements from each process of c into recv
// on every process, rank i's block at recv[displs[i]:displs[i]+counts[i]],
// as MPI_Allgatherv. nil displs packs the blocks in rank order.
func Allgatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int) error {
	return allgatherv(c, send, recv, counts, displs, false)
}

// AllgathervInPlace is Allgatherv with one buffer: buf is the receive
// buffer, each process's own block already in place (MPI_IN_PLACE).
func AllgathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int) error {
	return allgatherv(c, buf, buf, counts, displs, true)
}

// allgathervArgs checks the arguments of Allgatherv and Iallgatherv.
func allgathervArgs(c *Comm, op string, nsend, nrecv int, counts, displs []int, inplace bool) (h C.MPI_Comm, cc, cd []C.int, err error) {
	if h, err = c.handle(op); err != nil {
		return
	}
	if cc, cd, err = c.vlayout(op, "receive", counts, displs, nrecv); err != nil {
		return
	}
	if !inplace && int(cc[c.rank]) != nsend {
		err = argError(op, C.MPI_ERR_COUNT, "rank %d sends %d elements but counts[%d] is %d", c.rank, nsend, c.rank, cc[c.rank])
	}
	return
}

func allgatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, inplace bool) error {
	const op = "MPI_Allgatherv"
	h, cc, cd, err := allgathervArgs(c, op, len(send), len(recv), counts, displs, inplace)
	if err != nil {
		return err
	}
	defer callAllgatherv.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_allgatherv(sb.mem(), cbool(inplace), C.int(len(send)), rb.mem(), cptr(cc), cptr(cd), datatypes[rb.k], h))
}

// Scatterv sends send[displs[i]:displs[i]+counts[i]] from root to rank i
// of c, which receives it into recv, as MPI_Scatterv. counts and displs (in
// elements) matter at root only; nil displs packs the blocks in rank order.
func Scatterv[T Scalar](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	return scatterv(c, send, counts, displs, recv, root, false)
}

// ScattervInPlace is Scatterv with one buffer: at root, buf is the send
// buffer, and root's own block stays in it (MPI_IN_PLACE); on the other
// processes, buf receives their block.
func ScattervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) error {
	return scatterv(c, buf, counts, displs, buf, root, true)
}

// scattervArgs checks the arguments of Scatterv and Iscatterv.
func scattervArgs(c *Comm, op string, nsend, nrecv int, counts, displs []int, root int) (h C.MPI_Comm, rn C.int, cc, cd []C.int, err error) {
	if h, err = c.rootArgs(op, root); err != nil {
		return
	}
	if rn, err = count32(op, nrecv); err != nil {
		return
	}
	if c.rank == root {
		cc, cd, err = c.vlayout(op, "send", counts, displs, nsend)
	}
	return
}

func scatterv[T Scalar](c *Comm, send []T, counts, displs []int, recv []T, root int, inplace bool) error {
	const op = "MPI_Scatterv"
	inplace = inplace && c != nil && c.rank == root
	h, rn, cc, cd, err := scattervArgs(c, op, len(send), len(recv), counts, displs, root)
	if err != nil {
		return err
	}
	defer callScatterv.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(op, C.tdmpi_scatterv(sb.mem(), cptr(cc), cptr(cd), rb.mem(), cbool(inplace), rn, datatypes[rb.k], C.int(root), h))
}

func cptr(s []C.int) *C.int {
	if len(s) == 0 {
		return nil
	}
	return unsafe.SliceData(s)
}
