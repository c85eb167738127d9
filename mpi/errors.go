// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import (
	"errors"
	"strconv"
)

// Error is an error reported by MPI, or found by this package before it
// called MPI. Op names the MPI function ("MPI_Send"), Code is the MPI error
// code, Class its error class, and Msg the text MPI gives for the code (for
// errors found in Go, a description naming the class).
//
// Two *Error values match with errors.Is when their classes are equal, so
// errors.Is(err, mpi.ErrRank) reports whether err is an invalid-rank error.
type Error struct {
	Op    string
	Code  int
	Class int
	Msg   string
}

// Error returns "mpi: <Op>: <Msg>", for example
// "mpi: MPI_Send: MPI_ERR_RANK: invalid rank". Msg starts with the name of
// the error class in every MPI family; the rest of the text is the
// library's own and differs between families.
func (e *Error) Error() string {
	if e.Op == "" {
		return "mpi: " + e.Msg
	}
	return "mpi: " + e.Op + ": " + e.Msg
}

// Is reports whether target is an *Error of the same error class.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Class == e.Class
}

// ErrBusy is wrapped by the error of Finalize (and Busy) while MPI calls
// are in progress on other goroutines or nonblocking operations are
// incomplete.
var ErrBusy = errors.New("MPI is in use")

// ErrNoMPI is returned by every MPI entry point of a program built without
// cgo (CGO_ENABLED=0) or with -tags nompi, in which this package has no MPI
// library.
var ErrNoMPI = errors.New("tdmpi was built without cgo or with -tags nompi: MPI is unavailable")

// Error class sentinels, for use with errors.Is.
var (
	ErrBuffer      = classError(classBuffer)
	ErrCount       = classError(classCount)
	ErrType        = classError(classType)
	ErrTag         = classError(classTag)
	ErrComm        = classError(classComm)
	ErrRank        = classError(classRank)
	ErrRequest     = classError(classRequest)
	ErrRoot        = classError(classRoot)
	ErrGroup       = classError(classGroup)
	ErrOp          = classError(classOp)
	ErrArg         = classError(classArg)
	ErrUnknown     = classError(classUnknown)
	ErrTruncate    = classError(classTruncate)
	ErrOther       = classError(classOther)
	ErrIntern      = classError(classIntern)
	ErrInStatus    = classError(classInStatus)
	ErrPending     = classError(classPending)
	ErrNoMem       = classError(classNoMem)
	ErrNotSame     = classError(classNotSame)
	ErrUnsupported = classError(classUnsupportedOperation)
)

var classNames = map[int]string{
	classSuccess:              "MPI_SUCCESS",
	classBuffer:               "MPI_ERR_BUFFER",
	classCount:                "MPI_ERR_COUNT",
	classType:                 "MPI_ERR_TYPE",
	classTag:                  "MPI_ERR_TAG",
	classComm:                 "MPI_ERR_COMM",
	classRank:                 "MPI_ERR_RANK",
	classRequest:              "MPI_ERR_REQUEST",
	classRoot:                 "MPI_ERR_ROOT",
	classGroup:                "MPI_ERR_GROUP",
	classOp:                   "MPI_ERR_OP",
	classTopology:             "MPI_ERR_TOPOLOGY",
	classDims:                 "MPI_ERR_DIMS",
	classArg:                  "MPI_ERR_ARG",
	classUnknown:              "MPI_ERR_UNKNOWN",
	classTruncate:             "MPI_ERR_TRUNCATE",
	classOther:                "MPI_ERR_OTHER",
	classIntern:               "MPI_ERR_INTERN",
	classInStatus:             "MPI_ERR_IN_STATUS",
	classPending:              "MPI_ERR_PENDING",
	classNoMem:                "MPI_ERR_NO_MEM",
	classNotSame:              "MPI_ERR_NOT_SAME",
	classUnsupportedOperation: "MPI_ERR_UNSUPPORTED_OPERATION",
}

func className(class int) string {
	if s, ok := classNames[class]; ok {
		return s
	}
	return "MPI error class " + strconv.Itoa(class)
}

func classError(class int) *Error {
	return &Error{Code: class, Class: class, Msg: className(class)}
}
