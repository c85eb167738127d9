// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// #include "shim.h"
import "C"

import "unsafe"

// Reduce combines send from every process of c with op into recv at root,
// as MPI_Reduce. recv must have len(send) elements at root and is ignored
// elsewhere (it may be nil). At root, send == nil reduces in place: recv
// holds root's contribution and receives the result (MPI_IN_PLACE). Any
// length works; beyond 2^30 elements the reduction runs in pieces.
func Reduce[T Scalar](c *Comm, send, recv []T, op Op, root int) error {
	const name = "MPI_Reduce"
	h, err := c.handle(name)
	if err != nil {
		return err
	}
	if root < 0 || root >= c.size {
		return argError(name, C.MPI_ERR_ROOT, "root %d out of range [0, %d)", root, c.size)
	}
	k := kindOf[T]()
	if err := checkOp(name, op, k); err != nil {
		return err
	}
	inplace := send == nil
	n := len(send)
	if c.rank == root {
		if inplace {
			n = len(recv)
		} else if len(recv) != len(send) {
			return argError(name, C.MPI_ERR_BUFFER, "receive buffer has %d elements, send buffer %d", len(recv), len(send))
		}
	} else if inplace {
		return argError(name, C.MPI_ERR_BUFFER, "nil send buffer (in place) on rank %d, which is not root %d", c.rank, root)
	}
	var z T
	size := int(unsafe.Sizeof(z))
	sb, rb := bufOf(send), bufOf(recv)
	for off := 0; off < n || off == 0; off += reduceChunk {
		m := min(n-off, reduceChunk)
		var s, r unsafe.Pointer
		if m > 0 {
			if !inplace {
				s = unsafe.Add(sb.ptr, off*size)
			}
			if c.rank == root {
				r = unsafe.Add(rb.ptr, off*size)
			}
		}
		if err := newError(name, C.tdmpi_reduce(s, cbool(inplace), r, C.int(m), datatypes[k], ops[op], C.int(root), h)); err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return nil
}

// Allreduce combines send from every process of c with op into recv on
// every process, as MPI_Allreduce. recv must have len(send) elements;
// send == nil reduces in place in recv (MPI_IN_PLACE). Any length works;
// beyond 2^30 elements the reduction runs in pieces.
func Allreduce[T Scalar](c *Comm, send, recv []T, op Op) error {
	const name = "MPI_Allreduce"
	h, err := c.handle(name)
	if err != nil {
		return err
	}
	k := kindOf[T]()
	if err := checkOp(name, op, k); err != nil {
		return err
	}
	inplace := send == nil
	if !inplace && len(recv) != len(send) {
		return argError(name, C.MPI_ERR_BUFFER, "receive buffer has %d elements, send buffer %d", len(recv), len(send))
	}
	n := len(recv)
	var z T
	size := int(unsafe.Sizeof(z))
	sb, rb := bufOf(send), bufOf(recv)
	for off := 0; off < n || off == 0; off += reduceChunk {
		m := min(n-off, reduceChunk)
		var s, r unsafe.Pointer
		if m > 0 {
			if !inplace {
				s = unsafe.Add(sb.ptr, off*size)
			}
			r = unsafe.Add(rb.ptr, off*size)
		}
		if err := newError(name, C.tdmpi_allreduce(s, cbool(inplace), r, C.int(m), datatypes[k], ops[op], h)); err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return nil
}

// Scan computes the inclusive prefix reduction with op of send over the
// ranks 0..rank of c into recv, as MPI_Scan. recv must have len(send)
// elements; send == nil works in place in recv.
func Scan[T Scalar](c *Comm, send, recv []T, op Op) error {
	const name = "MPI_Scan"
	h, err := c.handle(name)
	if err != nil {
		return err
	}
	k := kindOf[T]()
	if err := checkOp(name, op, k); err != nil {
		return err
	}
	inplace := send == nil
	if !inplace && len(recv) != len(send) {
		return argError(name, C.MPI_ERR_BUFFER, "receive buffer has %d elements, send buffer %d", len(recv), len(send))
	}
	n, err := count32(name, len(recv))
	if err != nil {
		return err
	}
	sb, rb := bufOf(send), bufOf(recv)
	return newError(name, C.tdmpi_scan(sb.ptr, cbool(inplace), rb.ptr, n, datatypes[k], ops[op], h))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
