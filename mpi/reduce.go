// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
import "C"

// Reduce combines send from every process of c with op into recv at root,
// as MPI_Reduce. recv must have len(send) elements at root and is ignored
// elsewhere (it may be nil). Any length works; beyond 2^30 elements the
// reduction runs in pieces. ReduceInPlace saves root the second buffer.
func Reduce[T Scalar](c *Comm, send, recv []T, op Op, root int) error {
	return reduce(c, send, recv, op, root, false)
}

// ReduceInPlace is Reduce with one buffer: buf holds each process's
// contribution, and at root it receives the result. Only root passes
// MPI_IN_PLACE; the others pass buf as their send buffer, as the MPI
// standard requires (MPICH dereferences MPI_IN_PLACE elsewhere). MPICH
// 4.0's MPI_Reduce also dereferences MPI_IN_PLACE at a root other than 0
// for buffers of a few KiB and more, so in MPICH builds the root reduces
// from a copy of buf (at most 2^30 elements at a time) instead.
func ReduceInPlace[T Scalar](c *Comm, buf []T, op Op, root int) error {
	return reduce(c, buf, buf, op, root, true)
}

// reduceArgs checks the arguments of a reduction to root, and returns the
// element count and whether MPI_IN_PLACE applies on this rank.
func reduceArgs(c *Comm, name string, k kind, nsend, nrecv int, op Op, root int, inplace bool) (C.MPI_Comm, int, bool, error) {
	h, err := c.rootArgs(name, root)
	if err != nil {
		return h, 0, false, err
	}
	if err := checkOp(name, op, k); err != nil {
		return h, 0, false, err
	}
	if c.rank != root {
		return h, nsend, false, nil
	}
	if !inplace && nrecv != nsend {
		return h, 0, false, argError(name, C.MPI_ERR_BUFFER, "receive buffer has %d elements, send buffer %d", nrecv, nsend)
	}
	return h, nsend, inplace, nil
}

func reduce[T Scalar](c *Comm, send, recv []T, op Op, root int, inplace bool) error {
	const name = "MPI_Reduce"
	k := kindOf[T]()
	h, n, inplace, err := reduceArgs(c, name, k, len(send), len(recv), op, root, inplace)
	if err != nil {
		return err
	}
	var scratch []T
	if inplace && !reduceInPlaceAtRoot {
		// The library mishandles MPI_IN_PLACE here: reduce from a copy.
		scratch, inplace = make([]T, min(n, reduceChunk)), false
	}
	defer callReduce.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return chunks(n, reduceChunk, func(off, m int) error {
		s, r := sb.at(off, m), (*C.tdmpi_mem)(nil)
		if c.rank == root {
			r = rb.at(off, m)
		}
		if scratch != nil {
			copy(scratch, recv[off:off+m])
			s = bufOf(scratch).at(0, m)
		}
		return newError(name, C.tdmpi_reduce(s, cbool(inplace), r, C.int(m), datatypes[k], ops[op], C.int(root), h))
	})
}

// chunks calls f(off, m) for consecutive pieces [off, off+m) of at most
// size of n elements, once with m = 0 if n is 0. The reductions call it
// with reduceChunk: predefined operations do not apply to the derived
// datatypes that describe longer buffers, so long reductions run in
// pieces.
func chunks(n, size int, f func(off, m int) error) error {
	for off := 0; off < n || off == 0; off += size {
		if err := f(off, min(n-off, size)); err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return nil
}

// Allreduce combines send from every process of c with op into recv on
// every process, as MPI_Allreduce. recv must have len(send) elements. Any
// length works; beyond 2^30 elements the reduction runs in pieces.
func Allreduce[T Scalar](c *Comm, send, recv []T, op Op) error {
	return allreduce(c, send, recv, op, false)
}

// AllreduceInPlace is Allreduce with one buffer: buf holds each process's
// contribution and receives the result (MPI_IN_PLACE on every process).
func AllreduceInPlace[T Scalar](c *Comm, buf []T, op Op) error {
	return allreduce(c, buf, buf, op, true)
}

// allreduceArgs checks the arguments of an all-reduction.
func allreduceArgs(c *Comm, name string, k kind, nsend, nrecv int, op Op, inplace bool) (C.MPI_Comm, error) {
	h, err := c.handle(name)
	if err != nil {
		return h, err
	}
	if err := checkOp(name, op, k); err != nil {
		return h, err
	}
	if !inplace && nrecv != nsend {
		return h, argError(name, C.MPI_ERR_BUFFER, "receive buffer has %d elements, send buffer %d", nrecv, nsend)
	}
	return h, nil
}

func allreduce[T Scalar](c *Comm, send, recv []T, op Op, inplace bool) error {
	const name = "MPI_Allreduce"
	k := kindOf[T]()
	h, err := allreduceArgs(c, name, k, len(send), len(recv), op, inplace)
	if err != nil {
		return err
	}
	defer callAllreduce.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return chunks(len(recv), reduceChunk, func(off, m int) error {
		return newError(name, C.tdmpi_allreduce(sb.at(off, m), cbool(inplace), rb.at(off, m), C.int(m), datatypes[k], ops[op], h))
	})
}

// Scan computes the inclusive prefix reduction with op of send over the
// ranks 0..rank of c into recv, as MPI_Scan. recv must have len(send)
// elements.
func Scan[T Scalar](c *Comm, send, recv []T, op Op) error {
	return scan(c, send, recv, op, false)
}

// ScanInPlace is Scan with one buffer: buf holds each process's
// contribution and receives its prefix reduction (MPI_IN_PLACE).
func ScanInPlace[T Scalar](c *Comm, buf []T, op Op) error {
	return scan(c, buf, buf, op, true)
}

func scan[T Scalar](c *Comm, send, recv []T, op Op, inplace bool) error {
	const name = "MPI_Scan"
	k := kindOf[T]()
	h, err := allreduceArgs(c, name, k, len(send), len(recv), op, inplace)
	if err != nil {
		return err
	}
	n, err := count32(name, len(recv))
	if err != nil {
		return err
	}
	defer callScan.enter().leave()
	sb, rb := bufOf(send), bufOf(recv)
	return newError(name, C.tdmpi_scan(sb.mem(), cbool(inplace), rb.mem(), n, datatypes[k], ops[op], h))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
