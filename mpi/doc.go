// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mpi is a cgo binding to MPI (3.1 and later) for tdmpi: the
// environment, communicators, point-to-point messages, matched probes,
// nonblocking requests and collectives, with typed Go slices as buffers.
// It is the only package of tdmpi with C in it; no C type appears in its API.
//
// # MPI families
//
// The MPI library is chosen when the program is built, by a build tag;
// each family's link flags are in a file of their own (cgoflags_*.go):
//
//	go build ./...                 Open MPI (pkg-config ompi-c), the default
//	go build -tags mpich ./...     MPICH and its ABI (pkg-config mpich)
//	go build -tags nompi ./...     no MPI: every entry point returns ErrNoMPI
//	CGO_ENABLED=0 go build ./...   no MPI, as with -tags nompi
//
// Library reports the family built in, LibraryVersion the library's own
// version text. Compare errors by class (errors.Is against ErrTruncate and
// the others), not by text: the families word their messages differently,
// though Error always starts the message with the class name.
//
// With -tags nompi, or without cgo (CGO_ENABLED=0), the package builds
// with no C and the same API: Init, InitThread and every operation return
// ErrNoMPI, Initialized and Finalized report false, and Library returns
// FamilyNone. The files with C are those constrained by "cgo && !nompi",
// their stand-in is nompi.go ("!cgo || nompi"). Programs that only read
// and write tensordict files need no MPI library at all: built with
// -tags nompi, they need neither MPI's development files nor its
// libraries, even where cgo is on for other packages.
//
// Buffers are slices of a Scalar type. Operations on them are generic
// functions taking the communicator first, since Go methods cannot have type
// parameters:
//
//	if err := mpi.Init(); err != nil { ... }
//	defer mpi.Finalize()
//	w := mpi.World()
//	x := []float64{float64(w.Rank())}
//	err := mpi.AllreduceInPlace(w, x, mpi.OpSum)
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
// Go's runtime handles SIGSEGV, SIGBUS, SIGFPE and SIGILL itself (a nil
// dereference becomes a panic), and UCX, the transport of MPICH's ch4:ucx
// device (Debian's MPICH) and of Open MPI's UCX components, installs
// handlers for them unless UCX_ERROR_SIGNALS says otherwise; a UCX handler
// installed over Go's kills the process at the first fault Go expects to
// recover. So InitThread does two things. In Open MPI builds, where UCX is
// loaded by MPI_Init, it sets UCX_ERROR_SIGNALS to the empty string (UCX
// then takes no signal) if the environment does not set it; a value the
// user sets, even empty, is left alone. In MPICH builds UCX is linked in
// and configured before Go starts, too early for that: set
// UCX_ERROR_SIGNALS="" in the launcher's environment (mpiexec -genv) to
// silence it there. In both, InitThread records the handlers of those four
// signals before MPI_Init and puts Go's back wherever MPI_Init replaced
// them; Go's runtime still forwards faults in C code to the handler that
// was there when the program started.
//
// Finalize refuses (ErrBusy) while another goroutine is inside an MPI call
// or a nonblocking operation is incomplete; Busy tells beforehand.
//
// Init sets MPI_ERRORS_RETURN on World and Self, and every communicator the
// package creates (Comm.Dup, Comm.Split, Comm.SplitShared,
// Comm.CreateGroup) gets it too, so MPI reports errors instead of aborting
// the job. Communicators are released
// with Comm.Free, explicitly and collectively, never by finalizers; free them
// before Finalize. A program that must stop the whole job calls Abort; the
// package never does.
//
// # Waiting
//
// A blocking receive or probe (Recv, Probe, Mprobe, Sendrecv) polls MPI
// in a loop of nonblocking probes, as MPI_Mprobe does inside, but once it
// has waited DefaultSpinWait it yields its core after each poll. Ranks that
// poll on every core of a node otherwise keep the Go runtime's threads
// (garbage collector workers, other goroutines) off the cores for a
// scheduler time slice at a time: on two cores with two ranks, small
// transfers that allocate ran up to a third faster with it. Once it has
// waited 1 ms it sleeps between polls instead, for 1/16 of the time waited
// so far (5 us to 1 ms), which adds at most about 6% to a long wait:
// processes that yield in a loop can keep everything else off the cores.
// With Linux 6.18, four ranks on two cores in two Slurm job steps, each
// yielding while it waited for the others, stalled for 5-72 s at a time
// (the kernel reported its own threads starved); sleeping, the same
// exchanges never took more than 7 ms. SetSpinWait changes the spin
// period, or turns yielding and sleeping off.
//
// Request.Wait, Request.Await and WaitAll wait for operations of at most
// 64 KiB the same way. In the same Slurm job, a loop of small Isend/Irecv
// exchanges waited with a context (Await) went from about 10 ms a round,
// with stalls of up to 1.6 s, to 140-220 us, as fast as with Sendrecv. The
// wait for a larger operation tests without pause all along: its data may
// still be moving in the tests themselves (MPICH moves large messages on
// shared memory in steps that need both sides' polls). A loop that polls
// with checks of its own between (a context) paces itself the same way
// with a Pacer: a sleep on a Go timer lasts a millisecond or more on
// Linux, however short the sleep asked for.
//
// Every 10 us of polling, and after each sleep, a blocking receive or
// probe, Request.Wait on a request of one MPI operation, and WaitAll,
// returns from C to Go, lets the Go scheduler run (runtime.Gosched) and
// resumes where it was. A thread waiting in C holds its processor: in a
// rank bound to one core (GOMAXPROCS=1, as mpirun binds two ranks by
// default) the collector and the rank's other goroutines then run in the
// time it waits, instead of after the runtime's monitor gave the
// processor to another thread that must win the core from the one still
// polling. A goroutine locked to its thread (runtime.LockOSThread) goes on
// polling instead: the scheduler would hand its processor to another
// thread and back (20-30 us). Blocking collectives and sends wait inside
// MPI and do not return early.
//
// # Buffers and memory
//
// Scalar lists the element types: bool, the sized integers, int and uint
// (64-bit), float32, float64, complex64 and complex128, and named types
// with those underlying types. Each maps to one predefined MPI datatype,
// loaded once at package initialisation. Buffers must not contain Go
// pointers. Empty and nil slices are valid buffers of zero elements.
//
// Collectives whose result may replace the caller's own data have an
// InPlace variant (AllreduceInPlace, ReduceInPlace, AllgatherInPlace, ...),
// the explicit form of MPI_IN_PLACE. The binding passes MPI_IN_PLACE only
// where the MPI standard allows it: on every process for the all-to-all
// collectives, and at the root only for Reduce, Gather(v) and Scatter(v),
// whose other processes pass the same buffer as their send or receive
// buffer. A nil slice is never MPI_IN_PLACE: it is an empty buffer.
//
// Blocking calls pass the slice to C for the duration of the call only.
// Nonblocking ones (Isend, Irecv, Ibcast, Iallreduce, Ireduce, Iallgatherv,
// Igatherv, Iscatterv and their InPlace forms) pin their buffers with a
// runtime.Pinner until the operation completes (Request.Wait, a successful
// Request.Test, WaitAll, WaitAny, or Cancel followed by Wait), so the
// garbage collector can neither free nor move them while MPI uses them,
// even if nothing else refers to them. The caller must not touch the
// buffers until completion. Several goroutines may wait for, test, cancel
// or abandon one Request at once: each gets its result (see Request).
// A dropped Request is safe: the package keeps the operation registered
// and unpins its buffers once MPI completes it (see Request).
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
// Imrecv, the nonblocking receive of a matched Message, knows the
// message's size from its probe and refuses a buffer too short for it.
//
// Concurrent receivers on one communicator should use Mprobe and Mrecv:
// a Message is taken out of the matching queue, so no other goroutine can
// receive it, whereas a Probe followed by Recv may receive another message.
//
// Open MPI moves a contiguous buffer of more than 4 KiB between processes
// of one node with a single copy through the kernel (CMA), and a buffer
// that is not contiguous with two copies through shared memory, made by
// sender and receiver at once. On some machines the two copies are faster
// (on tdmpi's development VM, sends of 32 KiB-2 MiB took 0.4-0.7 of the
// time): SetTwoCopySends, or TDMPI_TWO_COPY=4KiB-4MiB in the environment,
// makes Send describe buffers in a size range as two blocks, so that they
// take that path. It is off by default.
//
// tdmpi's own packages reach a few more operations of this package
// through internal/mpix (sends from a copy, messages in two blocks, waits
// that a channel ends); Finalize waits for the sends from copies still in
// flight.
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
// Open MPI 4.1 counts elements with a C int (MPICH 4 has MPI 4's large-count
// functions, which the package does not use, so that both families take the
// same paths). Send, Recv, Sendrecv, Isend, Irecv, Mrecv, Imrecv, Bcast and Ibcast
// accept any length: beyond 2^31-1 elements the
// buffer is described by one derived datatype (blocks of 2^30 elements and
// a remainder joined by MPI_Type_create_struct, the BigMPI recipe), so it
// still travels as a single message that Probe and Mprobe see whole, with
// its full size in Status.Bytes. Predefined reduction operations do not
// apply to derived datatypes, so Reduce and Allreduce work through longer
// buffers in pieces of 2^30 elements, and Ireduce and Iallreduce start one
// operation per piece under one Request. The other collectives (Gather,
// Scatter, Alltoall, the v variants, Scan) return ErrCount beyond 2^31-1
// elements per rank.
//
// # Files
//
//	env.go         Init, InitThread, Finalize, Abort, Wtime, LibraryVersion,
//	               ThreadLevel; the goroutine locked to MPI's main thread
//	comm.go        Comm: World, Self, Rank, Size, TagUB, Dup, Split, SplitShared,
//	               CreateGroup, TranslateRank, Barrier, Free
//	types.go       Scalar, the element kinds and their MPI datatypes, buffers
//	               and the big-count datatype of long buffers
//	p2p.go         Send, Recv, Sendrecv, Probe, Iprobe; rank and tag checks
//	wait.go        DefaultSpinWait; spin.go: SetSpinWait, how long blocking
//	               waits poll before yielding (then sleeping), Pacer, and
//	               their returns to Go
//	message.go     Message: Mprobe, Improbe (and their Into forms), Mrecv, Imrecv
//	request.go     Request: Isend, Irecv, Wait, Test, Cancel, WaitAll,
//	               WaitAny; pinning buffers until completion
//	status.go      Status: Bytes, Count, Cancelled
//	collective.go  Bcast, Gather, Allgather, Scatter, Alltoall, Gatherv,
//	               Allgatherv, Scatterv
//	reduce.go      Reduce, Allreduce (in pieces beyond 2^30 elements), Scan
//	op.go          Op, the predefined reductions and the types each applies to
//	errors.go      Error, the error-class sentinels (ErrRank, ErrTruncate, ...)
//	hook.go        hands internal/mpix the operations only tdmpi's packages use
//	shim.h         the C helpers: predefined handles, the BigMPI datatype,
//	               statuses, receives that cannot overrun their buffer
package mpi
