// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mpi is a cgo binding to Open MPI (MPI 3.1) for tdmpi: the
// environment, communicators, point-to-point messages, matched probes,
// nonblocking requests and collectives, with typed Go slices as buffers.
// It is the only package of tdmpi with C in it; no C type appears in its API.
//
// Buffers are slices of a Scalar type. Operations on them are generic
// functions taking the communicator first, since Go methods cannot have type
// parameters:
//
//	if err := mpi.Init(); err != nil { ... }
//	defer mpi.Finalize()
//	w := mpi.World()
//	x := []float64{float64(w.Rank())}
//	err := mpi.Allreduce(w, nil, x, mpi.OpSum) // in place
//
// # Initialization and threads
//
// Init starts MPI at thread level ThreadMultiple and fails if MPI provides
// less; InitThread asks for another level. Any goroutine may then call MPI
// (at ThreadMultiple). MPI requires MPI_Finalize to run on the thread that
// called MPI_Init_thread, and Go moves goroutines between threads, so the
// package runs both on one dedicated goroutine locked to its OS thread: Init
// and Finalize may be called from any goroutine, and callers need not call
// runtime.LockOSThread. At ThreadFunneled and ThreadSingle, MPI calls are
// supposed to come from that thread only, which Go code cannot arrange;
// use those levels only if the MPI library does not care (Open MPI does not).
//
// Init sets MPI_ERRORS_RETURN on World and Self, and every communicator the
// package creates (Comm.Dup, Comm.Split, Comm.CreateGroup) gets it too, so
// MPI reports errors instead of aborting the job. Communicators are released
// with Comm.Free, explicitly and collectively, never by finalizers; free them
// before Finalize. A program that must stop the whole job calls Abort; the
// package never does.
//
// # Buffers and memory
//
// Scalar lists the element types: bool, the sized integers, int and uint
// (64-bit), float32, float64, complex64 and complex128, and named types
// with those underlying types. Each maps to one predefined MPI datatype,
// loaded once at package initialisation. Buffers must not contain Go
// pointers. Empty and nil slices are valid buffers of zero elements.
//
// Blocking calls pass the slice to C for the duration of the call only.
// Isend and Irecv pin their buffer with a runtime.Pinner kept in the
// Request until the request completes (Request.Wait, a successful
// Request.Test, WaitAll, WaitAny, or Cancel followed by Wait), so the
// garbage collector can neither free nor move it while MPI uses it, even
// if nothing else refers to it. The caller must not touch the buffer until
// completion. A Request belongs to one goroutine at a time.
//
// Receive buffers may be longer than the message; Status tells the size
// (Status.Bytes, Count). Recv, Sendrecv and Mrecv match the message with a
// matched probe before receiving it, and a message longer than the buffer
// fills the buffer and returns ErrTruncate without writing past its end:
// Open MPI 4.1's shared-memory transport (vader with CMA single copy) would
// otherwise write the whole message past the buffer. Irecv cannot check
// in advance: its buffer must be large enough for the message it matches
// (Open MPI 4.1 may write past a short Irecv buffer over shared memory, and
// silently truncates on Self), and so must the buffers of collectives,
// which are the same length on every rank where the operation says so.
//
// Concurrent receivers on one communicator should use Mprobe and Mrecv:
// a Message is taken out of the matching queue, so no other goroutine can
// receive it, whereas a Probe followed by Recv may receive another message.
//
// # Errors
//
// Every MPI return code is checked. Failures are returned as *Error, which
// names the MPI function, the error code and class, and MPI's message, as
// in "mpi: MPI_Send: MPI_ERR_RANK: destination rank 99 out of range [0, 2)".
// Arguments are checked in Go before calling C (ranks, roots, tags, buffer
// lengths, whether an Op applies to the element type), and those problems
// are reported as *Error of the matching class too. Errors compare by class
// with errors.Is against the sentinels ErrRank, ErrTag, ErrTruncate, ErrOp,
// and so on; errors.As gives the *Error. The package panics only when a nil
// or freed communicator is asked for its Rank, Size or TagUB.
//
// # Large messages
//
// Open MPI 4.1 counts elements with a C int. Send, Recv, Sendrecv, Isend,
// Irecv, Mrecv and Bcast accept any length: beyond 2^31-1 elements the
// buffer is described by one derived datatype (blocks of 2^30 elements and
// a remainder joined by MPI_Type_create_struct, the BigMPI recipe), so it
// still travels as a single message that Probe and Mprobe see whole, with
// its full size in Status.Bytes. Predefined reduction operations do not
// apply to derived datatypes, so Reduce and Allreduce work through longer
// buffers in pieces of 2^30 elements. The other collectives (Gather,
// Scatter, Alltoall, the v variants, Scan) return ErrCount beyond 2^31-1
// elements per rank.
//
// # Files
//
//	env.go         Init, InitThread, Finalize, Abort, Wtime, LibraryVersion,
//	               ThreadLevel; the goroutine locked to MPI's main thread
//	comm.go        Comm: World, Self, Rank, Size, TagUB, Dup, Split,
//	               CreateGroup, TranslateRank, Barrier, Free
//	types.go       Scalar, the element kinds and their MPI datatypes, buffers
//	               and the big-count datatype of long buffers
//	p2p.go         Send, Recv, Sendrecv, Probe, Iprobe; rank and tag checks
//	message.go     Message: Mprobe, Improbe, Mrecv (matched probes)
//	request.go     Request: Isend, Irecv, Wait, Test, Cancel, WaitAll,
//	               WaitAny; pinning buffers until completion
//	status.go      Status: Bytes, Count, Cancelled
//	collective.go  Bcast, Gather, Allgather, Scatter, Alltoall, Gatherv,
//	               Allgatherv, Scatterv
//	reduce.go      Reduce, Allreduce (in pieces beyond 2^30 elements), Scan
//	op.go          Op, the predefined reductions and the types each applies to
//	errors.go      Error, the error-class sentinels (ErrRank, ErrTruncate, ...)
//	shim.h         the C helpers: predefined handles, the BigMPI datatype,
//	               statuses, receives that cannot overrun their buffer
package mpi
