// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !cgo || nompi

package mpi

import (
	"reflect"
	"time"
)

// This file is the package without MPI (-tags nompi, or CGO_ENABLED=0): the
// API of the cgo build, with no MPI behind it. Init and every operation return ErrNoMPI;
// nothing here can reach MPI, so a program built this way runs everything
// of tdmpi that needs no communication.

const family = FamilyNone

// Thread support levels, in increasing order.
const (
	ThreadSingle     ThreadLevel = iota // one thread only
	ThreadFunneled                      // only the initialising thread calls MPI
	ThreadSerialized                    // any thread, one at a time
	ThreadMultiple                      // any thread, concurrently
)

// Wildcards and special values.
const (
	AnySource int = -1     // receive from any rank
	AnyTag    int = -1     // receive with any tag
	ProcNull  int = -2     // the null process
	Undefined int = -32766 // Split colour of ranks that join no communicator; absent rank
)

// Error classes, numbered for this build only.
const (
	classSuccess = iota
	classBuffer
	classCount
	classType
	classTag
	classComm
	classRank
	classRequest
	classRoot
	classGroup
	classOp
	classTopology
	classDims
	classArg
	classUnknown
	classTruncate
	classOther
	classIntern
	classInStatus
	classPending
	classNoMem
	classNotSame
	classUnsupportedOperation
)

// Comm is an MPI communicator; without MPI there is none, and World and
// Self are never initialised.
type Comm struct{}

// Message is a matched message; without MPI there is none.
type Message struct{}

// Request is a pending nonblocking operation; without MPI there is none.
type Request struct{}

var world, self Comm

// World returns MPI_COMM_WORLD, which this build never initialises.
func World() *Comm { return &world }

// Self returns MPI_COMM_SELF, which this build never initialises.
func Self() *Comm { return &self }

// Rank panics: MPI is never initialised in this build.
func (c *Comm) Rank() int { panic("mpi: Rank before Init (" + ErrNoMPI.Error() + ")") }

// Size panics: MPI is never initialised in this build.
func (c *Comm) Size() int { panic("mpi: Size before Init (" + ErrNoMPI.Error() + ")") }

// TagUB panics: MPI is never initialised in this build.
func (c *Comm) TagUB() int { panic("mpi: TagUB before Init (" + ErrNoMPI.Error() + ")") }

// Init returns ErrNoMPI.
func Init() error { return ErrNoMPI }

// InitThread returns ErrNoMPI.
func InitThread(level ThreadLevel) (ThreadLevel, error) { return 0, ErrNoMPI }

// Finalize returns ErrNoMPI.
func Finalize() error { return ErrNoMPI }

// waitCopies returns 0: nothing is ever in flight.
func waitCopies(d time.Duration) (int, error) { return 0, nil }

// Busy returns nil: nothing is ever in progress.
func Busy() error { return nil }

// Initialized reports false.
func Initialized() bool { return false }

// Finalized reports false.
func Finalized() bool { return false }

var start = time.Now()

// Wtime returns the seconds since the program started.
func Wtime() float64 { return time.Since(start).Seconds() }

// LibraryVersion returns "": there is no MPI library.
func LibraryVersion() string { return "" }

// inFlightOps returns 0.
func inFlightOps() int { return 0 }

// afterInFlight runs f at once: nothing is ever in flight.
func afterInFlight(f func()) { f() }

// Bcast returns ErrNoMPI: this build has no MPI.
func Bcast[T Scalar](c *Comm, buf []T, root int) error { return ErrNoMPI }

// Gather returns ErrNoMPI: this build has no MPI.
func Gather[T Scalar](c *Comm, send, recv []T, root int) error { return ErrNoMPI }

// GatherInPlace returns ErrNoMPI: this build has no MPI.
func GatherInPlace[T Scalar](c *Comm, buf []T, root int) error { return ErrNoMPI }

// Allgather returns ErrNoMPI: this build has no MPI.
func Allgather[T Scalar](c *Comm, send, recv []T) error { return ErrNoMPI }

// AllgatherInPlace returns ErrNoMPI: this build has no MPI.
func AllgatherInPlace[T Scalar](c *Comm, buf []T) error { return ErrNoMPI }

// Scatter returns ErrNoMPI: this build has no MPI.
func Scatter[T Scalar](c *Comm, send, recv []T, root int) error { return ErrNoMPI }

// ScatterInPlace returns ErrNoMPI: this build has no MPI.
func ScatterInPlace[T Scalar](c *Comm, buf []T, root int) error { return ErrNoMPI }

// Alltoall returns ErrNoMPI: this build has no MPI.
func Alltoall[T Scalar](c *Comm, send, recv []T) error { return ErrNoMPI }

// AlltoallInPlace returns ErrNoMPI: this build has no MPI.
func AlltoallInPlace[T Scalar](c *Comm, buf []T) error { return ErrNoMPI }

// Gatherv returns ErrNoMPI: this build has no MPI.
func Gatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return ErrNoMPI
}

// GathervInPlace returns ErrNoMPI: this build has no MPI.
func GathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) error {
	return ErrNoMPI
}

// Allgatherv returns ErrNoMPI: this build has no MPI.
func Allgatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int) error { return ErrNoMPI }

// AllgathervInPlace returns ErrNoMPI: this build has no MPI.
func AllgathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int) error { return ErrNoMPI }

// Scatterv returns ErrNoMPI: this build has no MPI.
func Scatterv[T Scalar](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	return ErrNoMPI
}

// ScattervInPlace returns ErrNoMPI: this build has no MPI.
func ScattervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) error {
	return ErrNoMPI
}

// Dup returns ErrNoMPI: this build has no MPI.
func (c *Comm) Dup() (*Comm, error) { return nil, ErrNoMPI }

// Split returns ErrNoMPI: this build has no MPI.
func (c *Comm) Split(color, key int) (*Comm, error) { return nil, ErrNoMPI }

// SplitShared returns ErrNoMPI: this build has no MPI.
func (c *Comm) SplitShared() (*Comm, error) { return nil, ErrNoMPI }

// CreateGroup returns ErrNoMPI: this build has no MPI.
func (c *Comm) CreateGroup(ranks []int, tag int) (*Comm, error) { return nil, ErrNoMPI }

// TranslateRank returns ErrNoMPI: this build has no MPI.
func (c *Comm) TranslateRank(rank int, to *Comm) (int, error) { return Undefined, ErrNoMPI }

// Free returns ErrNoMPI: this build has no MPI.
func (c *Comm) Free() error { return ErrNoMPI }

// Barrier returns ErrNoMPI: this build has no MPI.
func (c *Comm) Barrier() error { return ErrNoMPI }

// Abort returns ErrNoMPI: this build has no MPI.
func Abort(c *Comm, code int) error { return ErrNoMPI }

// Ibcast returns ErrNoMPI: this build has no MPI.
func Ibcast[T Scalar](c *Comm, buf []T, root int) (*Request, error) { return nil, ErrNoMPI }

// ibcastWait returns ErrNoMPI: this build has no MPI.
func ibcastWait[T Scalar](c *Comm, buf []T, root int) error { return ErrNoMPI }

// ibcastUntilBytes returns ErrNoMPI: this build has no MPI.
func ibcastUntilBytes(c *Comm, b []byte, elem reflect.Type, root int, done <-chan struct{}) (bool, error) {
	return false, ErrNoMPI
}

// iallreduceUntilBytes returns ErrNoMPI: this build has no MPI.
func iallreduceUntilBytes(c *Comm, b []byte, elem reflect.Type, op Op, done <-chan struct{}) (bool, error) {
	return false, ErrNoMPI
}

// Iallreduce returns ErrNoMPI: this build has no MPI.
func Iallreduce[T Scalar](c *Comm, send, recv []T, op Op) (*Request, error) { return nil, ErrNoMPI }

// IallreduceInPlace returns ErrNoMPI: this build has no MPI.
func IallreduceInPlace[T Scalar](c *Comm, buf []T, op Op) (*Request, error) { return nil, ErrNoMPI }

// iallreduceInPlaceWait returns ErrNoMPI: this build has no MPI.
func iallreduceInPlaceWait[T Scalar](c *Comm, buf []T, op Op) error { return ErrNoMPI }

// Ireduce returns ErrNoMPI: this build has no MPI.
func Ireduce[T Scalar](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	return nil, ErrNoMPI
}

// IreduceInPlace returns ErrNoMPI: this build has no MPI.
func IreduceInPlace[T Scalar](c *Comm, buf []T, op Op, root int) (*Request, error) {
	return nil, ErrNoMPI
}

// Iallgatherv returns ErrNoMPI: this build has no MPI.
func Iallgatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	return nil, ErrNoMPI
}

// IallgathervInPlace returns ErrNoMPI: this build has no MPI.
func IallgathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int) (*Request, error) {
	return nil, ErrNoMPI
}

// Igatherv returns ErrNoMPI: this build has no MPI.
func Igatherv[T Scalar](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	return nil, ErrNoMPI
}

// IgathervInPlace returns ErrNoMPI: this build has no MPI.
func IgathervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) (*Request, error) {
	return nil, ErrNoMPI
}

// Iscatterv returns ErrNoMPI: this build has no MPI.
func Iscatterv[T Scalar](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	return nil, ErrNoMPI
}

// IscattervInPlace returns ErrNoMPI: this build has no MPI.
func IscattervInPlace[T Scalar](c *Comm, buf []T, counts, displs []int, root int) (*Request, error) {
	return nil, ErrNoMPI
}

// Mprobe returns ErrNoMPI: this build has no MPI.
func Mprobe(c *Comm, src, tag int) (*Message, Status, error) { return nil, Status{}, ErrNoMPI }

// Improbe returns ErrNoMPI: this build has no MPI.
func Improbe(c *Comm, src, tag int) (*Message, bool, Status, error) {
	return nil, false, Status{}, ErrNoMPI
}

// recvExactUntil returns ErrNoMPI: this build has no MPI.
func recvExactUntil(m *Message, c *Comm, buf []byte, src, tag int, done <-chan struct{}) (Status, bool, bool, error) {
	return Status{}, false, false, ErrNoMPI
}

// MprobeInto returns ErrNoMPI: this build has no MPI.
func MprobeInto(m *Message, c *Comm, src, tag int) (Status, error) { return Status{}, ErrNoMPI }

// mrecvUntil returns ErrNoMPI: this build has no MPI.
func mrecvUntil(m *Message, buf []byte, done <-chan struct{}) (Status, bool, error) {
	return Status{}, false, ErrNoMPI
}

// mprobeUntil returns ErrNoMPI: this build has no MPI.
func mprobeUntil(m *Message, c *Comm, src, tag int, done <-chan struct{}) (Status, bool, error) {
	return Status{}, false, ErrNoMPI
}

// ImprobeInto returns ErrNoMPI: this build has no MPI.
func ImprobeInto(m *Message, c *Comm, src, tag int) (bool, Status, error) {
	return false, Status{}, ErrNoMPI
}

// mrecvConcat returns ErrNoMPI: this build has no MPI.
func mrecvConcat(m *Message, a, b []byte) (Status, error) { return Status{}, ErrNoMPI }

// Mrecv returns ErrNoMPI: this build has no MPI.
func Mrecv[T Scalar](m *Message, buf []T) (Status, error) { return Status{}, ErrNoMPI }

// Imrecv returns ErrNoMPI: this build has no MPI.
func Imrecv[T Scalar](m *Message, buf []T) (*Request, error) { return nil, ErrNoMPI }

// Send returns ErrNoMPI: this build has no MPI.
func Send[T Scalar](c *Comm, buf []T, dest, tag int) error { return ErrNoMPI }

// sendConcat returns ErrNoMPI: this build has no MPI.
func sendConcat(c *Comm, a, b []byte, dest, tag int) error { return ErrNoMPI }

func sendBlocksUntil(c *Comm, blocks [][]byte, dest, tag int, done <-chan struct{}) (bool, error) {
	return false, ErrNoMPI
}

// sendUntil returns ErrNoMPI: this build has no MPI.
func sendUntil(c *Comm, buf []byte, dest, tag int, done <-chan struct{}) (bool, error) {
	return false, ErrNoMPI
}

// sendConcatUntil returns ErrNoMPI: this build has no MPI.
func sendConcatUntil(c *Comm, a, b []byte, dest, tag int, done <-chan struct{}) (bool, error) {
	return false, ErrNoMPI
}

// sendCopy returns ErrNoMPI: this build has no MPI.
func sendCopy(c *Comm, buf []byte, dest, tag int) (bool, error) { return false, ErrNoMPI }

// Recv returns ErrNoMPI: this build has no MPI.
func Recv[T Scalar](c *Comm, buf []T, src, tag int) (Status, error) { return Status{}, ErrNoMPI }

// Sendrecv returns ErrNoMPI: this build has no MPI.
func Sendrecv[T Scalar](c *Comm, send []T, dest, sendTag int, recv []T, src, recvTag int) (Status, error) {
	return Status{}, ErrNoMPI
}

// Probe returns ErrNoMPI: this build has no MPI.
func Probe(c *Comm, src, tag int) (Status, error) { return Status{}, ErrNoMPI }

// Iprobe returns ErrNoMPI: this build has no MPI.
func Iprobe(c *Comm, src, tag int) (bool, Status, error) { return false, Status{}, ErrNoMPI }

// Reduce returns ErrNoMPI: this build has no MPI.
func Reduce[T Scalar](c *Comm, send, recv []T, op Op, root int) error { return ErrNoMPI }

// ReduceInPlace returns ErrNoMPI: this build has no MPI.
func ReduceInPlace[T Scalar](c *Comm, buf []T, op Op, root int) error { return ErrNoMPI }

// Allreduce returns ErrNoMPI: this build has no MPI.
func Allreduce[T Scalar](c *Comm, send, recv []T, op Op) error { return ErrNoMPI }

// AllreduceInPlace returns ErrNoMPI: this build has no MPI.
func AllreduceInPlace[T Scalar](c *Comm, buf []T, op Op) error { return ErrNoMPI }

// Scan returns ErrNoMPI: this build has no MPI.
func Scan[T Scalar](c *Comm, send, recv []T, op Op) error { return ErrNoMPI }

// ScanInPlace returns ErrNoMPI: this build has no MPI.
func ScanInPlace[T Scalar](c *Comm, buf []T, op Op) error { return ErrNoMPI }

// Isend returns ErrNoMPI: this build has no MPI.
func Isend[T Scalar](c *Comm, buf []T, dest, tag int) (*Request, error) { return nil, ErrNoMPI }

// Irecv returns ErrNoMPI: this build has no MPI.
func Irecv[T Scalar](c *Comm, buf []T, src, tag int) (*Request, error) { return nil, ErrNoMPI }

// Wait returns ErrNoMPI: this build has no MPI.
func (r *Request) Wait() (Status, error) { return Status{}, ErrNoMPI }

// Test returns ErrNoMPI: this build has no MPI.
func (r *Request) Test() (done bool, st Status, err error) { return false, Status{}, ErrNoMPI }

// Await returns ErrNoMPI: this build has no MPI.
func (r *Request) Await() (done bool, st Status, err error) { return false, Status{}, ErrNoMPI }

// Cancel returns ErrNoMPI: this build has no MPI.
func (r *Request) Cancel() error { return ErrNoMPI }

// Abandon does nothing: this build starts no request.
func (r *Request) Abandon() {}

// Op returns "": this build starts no request.
func (r *Request) Op() string { return "" }

// WaitAll returns ErrNoMPI: this build has no MPI.
func WaitAll(reqs ...*Request) error { return ErrNoMPI }

// WaitAny returns ErrNoMPI: this build has no MPI.
func WaitAny(reqs ...*Request) (index int, st Status, err error) {
	return Undefined, Status{}, ErrNoMPI
}

var spinWait = DefaultSpinWait

// SetSpinWait records d and returns the previous value; without MPI there
// are no waits.
func SetSpinWait(d time.Duration) time.Duration {
	old := spinWait
	spinWait = max(d, 0)
	return old
}

var twoCopyLo, twoCopyHi int

// SetTwoCopySends records the bounds lo and hi and returns the previous
// ones; without MPI there are no sends.
func SetTwoCopySends(lo, hi int) (oldLo, oldHi int) {
	oldLo, oldHi = twoCopyLo, twoCopyHi
	twoCopyLo, twoCopyHi = max(lo, 0), max(hi, 0)
	if lo <= 0 {
		twoCopyLo, twoCopyHi = 0, 0
	}
	return oldLo, oldHi
}

// A Pacer paces a loop that polls MPI; this build has no MPI, and Pause
// only lets the Go scheduler run (yield).
type Pacer struct{}

// Pause lets the Go scheduler run (yield): this build has no MPI.
func (p *Pacer) Pause() { yield() }
