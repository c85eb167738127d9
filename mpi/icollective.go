// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #cgo nocallback tdmpi_ibcast_start
// #cgo nocallback tdmpi_iallreduce_start
// #include "shim.h"
import "C"

import (
	"reflect"
	"unsafe"
)

// Nonblocking collectives. Each starts the operation and returns a Request
// to complete with Wait, Test, WaitAll or WaitAny; its buffers stay pinned
// until then, as those of Isend and Irecv. Every process of the
// communicator starts the same collectives in the same order (MPI matches
// them by order, not by tag), and may overlap them with other work. Their
// arguments are those of the blocking collectives, checked the same way.

// Ibcast starts sending buf from root to every other process of c, as
// MPI_Ibcast. Any length works, as with Bcast.
func Ibcast[T Scalar](c *Comm, buf []T, root int) (*Request, error) {
	const op = "MPI_Ibcast"
	h, err := c.rootArgs(op, root)
	if err != nil {
		return nil, err
	}
	b := bufOf(buf)
	return istart(op, b, true, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer, q *C.MPI_Request) C.int {
		return C.tdmpi_ibcast(b.mem(), n, dt, C.int(root), h, q)
	})
}

// ibcastWait is Ibcast followed by Request.Wait, in one call: it matches
// the other processes' Ibcast (MPI does not match a nonblocking collective
// with a blocking one), for a caller that waits for it at once. It keeps
// no Request: its buffer is pinned and the operation waited for within the
// call (which pauses as Wait does), so it costs no allocation, finalizer
// or registration. The wait cannot be given up; ibcastUntil's can.
func ibcastWait[T Scalar](c *Comm, buf []T, root int) error {
	_, err := ibcastUntil(c, buf, root, nil)
	return err
}

// ibcastUntil is ibcastWait whose wait ends once done is closed (nil: it
// never does): ended is then true, and the broadcast, still under way, is
// abandoned to the package as a dropped Request is (see inFlightOps): buf
// stays pinned until MPI completes it, if ever. The caller must not use
// the communicator's collectives again, since MPI pairs them by order.
func ibcastUntil[T Scalar](c *Comm, buf []T, root int, done <-chan struct{}) (ended bool, err error) {
	return ibcastUntilBuf(c, bufOf(buf), root, done)
}

// ibcastUntilBuf is ibcastUntil of the buffer b.
func ibcastUntilBuf(c *Comm, b buffer, root int, done <-chan struct{}) (ended bool, err error) {
	const op = "MPI_Ibcast"
	h, err := c.rootArgs(op, root)
	if err != nil {
		return false, err
	}
	var cst C.tdmpi_status
	rc, ended, err := startUntil(op, b, true, b.bytes() <= pauseMaxBytes, done, &cst, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer) C.tdmpi_started {
		return C.tdmpi_ibcast_start(b.mem(), n, dt, C.int(root), h)
	})
	if err != nil || ended {
		return ended, err
	}
	return false, newError(op, rc)
}

// Iallreduce starts combining send from every process of c with op into
// recv on every process, as MPI_Iallreduce. Any length works: beyond 2^30
// elements it starts one MPI_Iallreduce per piece, all completed by the
// one Request.
func Iallreduce[T Scalar](c *Comm, send, recv []T, op Op) (*Request, error) {
	return iallreduce(c, send, recv, op, false)
}

// IallreduceInPlace is Iallreduce with one buffer: buf holds each
// process's contribution and receives the result (MPI_IN_PLACE).
func IallreduceInPlace[T Scalar](c *Comm, buf []T, op Op) (*Request, error) {
	return iallreduce(c, buf, buf, op, true)
}

func iallreduce[T Scalar](c *Comm, send, recv []T, op Op, inplace bool) (*Request, error) {
	return iallreduceBuf(c, bufOf(send), bufOf(recv), op, inplace)
}

// iallreduceBuf is iallreduce of the buffers sb and rb.
func iallreduceBuf(c *Comm, sb, rb buffer, op Op, inplace bool) (*Request, error) {
	const name = "MPI_Iallreduce"
	k := rb.k
	h, err := allreduceArgs(c, name, k, sb.n, rb.n, op, inplace)
	if err != nil {
		return nil, err
	}
	reap()
	r := newRequest(name, k, rb.size, true, max(sb.bytes(), rb.bytes()), sb.ptr, rb.ptr)
	err = chunks(rb.n, reduceChunk, func(off, m int) error {
		return newError(name, r.post(func(q *C.MPI_Request) C.int {
			return C.tdmpi_iallreduce(sb.at(off, m), cbool(inplace), rb.at(off, m), C.int(m), datatypes[k], ops[op], h, q)
		}))
	})
	return r.start(err)
}

// iallreduceInPlaceWait is IallreduceInPlace followed by Request.Wait, in
// one call, as ibcastWait is for Ibcast: it matches the other processes'
// Iallreduce, keeps no Request, and cannot be given up. A reduction of a
// byte took 0.78-0.86 us against 1.17-1.26 with IallreduceInPlace and
// Wait (np 2, two runs; the blocking AllreduceInPlace, which the others
// cannot match, 0.30-0.32 us). Beyond 2^30 elements it runs as
// IallreduceInPlace and Wait.
func iallreduceInPlaceWait[T Scalar](c *Comm, buf []T, op Op) error {
	_, err := iallreduceInPlaceUntil(c, buf, op, nil)
	return err
}

// iallreduceInPlaceUntil is iallreduceInPlaceWait whose wait ends once
// done is closed (nil: it never does), as ibcastUntil's does: ended is
// then true and the reduction is abandoned with buf. Beyond 2^30 elements
// the wait cannot end early.
func iallreduceInPlaceUntil[T Scalar](c *Comm, buf []T, op Op, done <-chan struct{}) (ended bool, err error) {
	return iallreduceUntilBuf(c, bufOf(buf), op, done)
}

// iallreduceUntilBuf is iallreduceInPlaceUntil of the buffer b.
func iallreduceUntilBuf(c *Comm, b buffer, op Op, done <-chan struct{}) (ended bool, err error) {
	const name = "MPI_Iallreduce"
	if b.n > reduceChunk {
		r, err := iallreduceBuf(c, b, b, op, true)
		if err == nil {
			_, err = r.Wait()
		}
		return false, err
	}
	h, err := allreduceArgs(c, name, b.k, b.n, b.n, op, true)
	if err != nil {
		return false, err
	}
	var cst C.tdmpi_status
	rc, ended, err := startUntil(name, b, true, b.bytes() <= pauseMaxBytes, done, &cst, func(dt C.MPI_Datatype, n C.int, _ unsafe.Pointer) C.tdmpi_started {
		return C.tdmpi_iallreduce_start(b.mem(), n, dt, ops[op], h)
	})
	if err != nil || ended {
		return ended, err
	}
	return false, newError(name, rc)
}

// Ireduce starts combining send from every process of c with op into recv
// at root, as MPI_Ireduce. recv must have len(send) elements at root and is
// ignored elsewhere. Any length works, in pieces as Iallreduce.
func Ireduce[T Scalar](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	return ireduce(c, send, recv, op, root, false)
}

// IreduceInPlace is Ireduce with one buffer: buf holds each process's
// contribution, and at root it receives the result. Only root passes
// MPI_IN_PLACE, as for ReduceInPlace.
func IreduceInPlace[T Scalar](c *Comm, buf []T, op Op, root int) (*Request, error) {
	return ireduce(c, buf, buf, op, root, true)
}

func ireduce[T Scalar](c *Comm, send, recv []T, op Op, root int, inplace bool) (*Request, error) {
	const name = "MPI_Ireduce"
	k := kindOf[T]()
	h, n, inplace, err := reduceArgs(c, name, k, len(send), len(recv), op, root, inplace)
	if err != nil {
		return nil, err
	}
	reap()
	sb, rb := bufOf(send), bufOf(recv)
	r := newRequest(name, k, sb.size, true, max(sb.bytes(), rb.bytes()), sb.ptr, rb.ptr)
	err = chunks(n, reduceChunk, func(off, m int) error {
		s, rp := sb.at(off, m), (*C.tdmpi_mem)(nil)
		if c.rank == root {
			rp = rb.at(off, m)
		}
		return newError(name, r.post(func(q *C.MPI_Request) C.int {
			return C.tdmpi_ireduce(s, cbool(inplace), rp, C.int(m), datatypes[k], ops[op], C.int(root), h, q)
		}))
	})
	return r.start(err)
}

// Iallgatherv starts collecting len(send) elements from each process of c
// into recv on every process, rank i's block at
// recv[displs[i]:displs[i]+counts[i]], as MPI_Iallgatherv. nil displs packs
// the blocks in rank order.
func Iallgatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	return iallgatherv(c, send, recv, counts, displs, false)
}

// IallgathervInPlace is Iallgatherv with one buffer: buf is the receive
// buffer, each process's own block already in place (MPI_IN_PLACE).
func IallgathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int) (*Request, error) {
	return iallgatherv(c, buf, buf, counts, displs, true)
}

func iallgatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, inplace bool) (*Request, error) {
	const op = "MPI_Iallgatherv"
	h, cc, cd, err := allgathervArgs(c, op, len(send), len(recv), counts, displs, inplace)
	if err != nil {
		return nil, err
	}
	sb, rb := bufOf(send), bufOf(recv)
	return vstart(op, rb, sb, cc, cd, func(q *C.MPI_Request) C.int {
		return C.tdmpi_iallgatherv(sb.mem(), cbool(inplace), C.int(len(send)), rb.mem(), cptr(cc), cptr(cd), datatypes[rb.k], h, q)
	})
}

// vstart starts the nonblocking v-collective op on buffers b (whose
// element kind the status counts) and other by calling call. MPI reads the
// counts cc and displacements cd until the operation completes, so they
// are pinned with the buffers.
func vstart(op string, b, other buffer, cc, cd []C.int, call func(q *C.MPI_Request) C.int) (*Request, error) {
	reap()
	r := newRequest(op, b.k, b.size, true, max(b.bytes(), other.bytes()), b.ptr, other.ptr, unsafe.Pointer(cptr(cc)), unsafe.Pointer(cptr(cd)))
	return r.start(newError(op, r.post(call)))
}

// Igatherv starts collecting len(send) elements from each process of c
// into recv at root, as MPI_Igatherv (see Gatherv).
func Igatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	return igatherv(c, send, recv, counts, displs, root, false)
}

// IgathervInPlace is Igatherv with one buffer, as GathervInPlace: root's
// block is already in place in buf at root; elsewhere buf is the block sent.
func IgathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) (*Request, error) {
	return igatherv(c, buf, buf, counts, displs, root, true)
}

func igatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, root int, inplace bool) (*Request, error) {
	const op = "MPI_Igatherv"
	inplace = inplace && c != nil && c.rank == root
	h, sn, cc, cd, err := gathervArgs(c, op, len(send), len(recv), counts, displs, root, inplace)
	if err != nil {
		return nil, err
	}
	sb, rb := bufOf(send), bufOf(recv)
	return vstart(op, sb, rb, cc, cd, func(q *C.MPI_Request) C.int {
		return C.tdmpi_igatherv(sb.mem(), cbool(inplace), sn, rb.mem(), cptr(cc), cptr(cd), datatypes[sb.k], C.int(root), h, q)
	})
}

// Iscatterv starts sending send[displs[i]:displs[i]+counts[i]] from root to
// rank i of c, which receives it into recv, as MPI_Iscatterv (see Scatterv).
func Iscatterv[T Scalar](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	return iscatterv(c, send, counts, displs, recv, root, false)
}

// IscattervInPlace is Iscatterv with one buffer, as ScattervInPlace: at
// root buf is the send buffer and root's block stays in it; elsewhere buf
// receives the block.
func IscattervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) (*Request, error) {
	return iscatterv(c, buf, counts, displs, buf, root, true)
}

func iscatterv[T Scalar](c *Comm, send []T, counts, displs []int, recv []T, root int, inplace bool) (*Request, error) {
	const op = "MPI_Iscatterv"
	inplace = inplace && c != nil && c.rank == root
	h, rn, cc, cd, err := scattervArgs(c, op, len(send), len(recv), counts, displs, root)
	if err != nil {
		return nil, err
	}
	sb, rb := bufOf(send), bufOf(recv)
	return vstart(op, rb, sb, cc, cd, func(q *C.MPI_Request) C.int {
		return C.tdmpi_iscatterv(sb.mem(), cptr(cc), cptr(cd), rb.mem(), cbool(inplace), rn, datatypes[rb.k], C.int(root), h, q)
	})
}

// bytesBuf returns the buffer of elements of type elem, a Scalar type,
// whose bytes are b.
func bytesBuf(b []byte, elem reflect.Type) buffer {
	size := int(elem.Size())
	buf := buffer{n: len(b) / size, k: reflectKinds[elem.Kind()], size: size}
	if len(b) > 0 {
		buf.ptr = unsafe.Pointer(unsafe.SliceData(b))
	}
	return buf
}

// ibcastUntilBytes is ibcastUntil of the elements of type elem whose bytes
// are b (see package internal/mpix/hook).
func ibcastUntilBytes(c *Comm, b []byte, elem reflect.Type, root int, done <-chan struct{}) (bool, error) {
	return ibcastUntilBuf(c, bytesBuf(b, elem), root, done)
}

// iallreduceUntilBytes is iallreduceInPlaceUntil of the elements of type
// elem whose bytes are b (see package internal/mpix/hook).
func iallreduceUntilBytes(c *Comm, b []byte, elem reflect.Type, op Op, done <-chan struct{}) (bool, error) {
	return iallreduceUntilBuf(c, bytesBuf(b, elem), op, done)
}
