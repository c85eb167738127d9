// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// Error class sentinels, for use with errors.Is.
var (
	ErrBuffer      = classError(C.MPI_ERR_BUFFER)
	ErrCount       = classError(C.MPI_ERR_COUNT)
	ErrType        = classError(C.MPI_ERR_TYPE)
	ErrTag         = classError(C.MPI_ERR_TAG)
	ErrComm        = classError(C.MPI_ERR_COMM)
	ErrRank        = classError(C.MPI_ERR_RANK)
	ErrRequest     = classError(C.MPI_ERR_REQUEST)
	ErrRoot        = classError(C.MPI_ERR_ROOT)
	ErrGroup       = classError(C.MPI_ERR_GROUP)
	ErrOp          = classError(C.MPI_ERR_OP)
	ErrArg         = classError(C.MPI_ERR_ARG)
	ErrUnknown     = classError(C.MPI_ERR_UNKNOWN)
	ErrTruncate    = classError(C.MPI_ERR_TRUNCATE)
	ErrOther       = classError(C.MPI_ERR_OTHER)
	ErrIntern      = classError(C.MPI_ERR_INTERN)
	ErrInStatus    = classError(C.MPI_ERR_IN_STATUS)
	ErrPending     = classError(C.MPI_ERR_PENDING)
	ErrNoMem       = classError(C.MPI_ERR_NO_MEM)
	ErrNotSame     = classError(C.MPI_ERR_NOT_SAME)
	ErrUnsupported = classError(C.MPI_ERR_UNSUPPORTED_OPERATION)
)

var classNames = map[int]string{
	C.MPI_SUCCESS:                   "MPI_SUCCESS",
	C.MPI_ERR_BUFFER:                "MPI_ERR_BUFFER",
	C.MPI_ERR_COUNT:                 "MPI_ERR_COUNT",
	C.MPI_ERR_TYPE:                  "MPI_ERR_TYPE",
	C.MPI_ERR_TAG:                   "MPI_ERR_TAG",
	C.MPI_ERR_COMM:                  "MPI_ERR_COMM",
	C.MPI_ERR_RANK:                  "MPI_ERR_RANK",
	C.MPI_ERR_REQUEST:               "MPI_ERR_REQUEST",
	C.MPI_ERR_ROOT:                  "MPI_ERR_ROOT",
	C.MPI_ERR_GROUP:                 "MPI_ERR_GROUP",
	C.MPI_ERR_OP:                    "MPI_ERR_OP",
	C.MPI_ERR_TOPOLOGY:              "MPI_ERR_TOPOLOGY",
	C.MPI_ERR_DIMS:                  "MPI_ERR_DIMS",
	C.MPI_ERR_ARG:                   "MPI_ERR_ARG",
	C.MPI_ERR_UNKNOWN:               "MPI_ERR_UNKNOWN",
	C.MPI_ERR_TRUNCATE:              "MPI_ERR_TRUNCATE",
	C.MPI_ERR_OTHER:                 "MPI_ERR_OTHER",
	C.MPI_ERR_INTERN:                "MPI_ERR_INTERN",
	C.MPI_ERR_IN_STATUS:             "MPI_ERR_IN_STATUS",
	C.MPI_ERR_PENDING:               "MPI_ERR_PENDING",
	C.MPI_ERR_NO_MEM:                "MPI_ERR_NO_MEM",
	C.MPI_ERR_NOT_SAME:              "MPI_ERR_NOT_SAME",
	C.MPI_ERR_UNSUPPORTED_OPERATION: "MPI_ERR_UNSUPPORTED_OPERATION",
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

// newError wraps the MPI return code rc of op. It returns nil when rc is
// MPI_SUCCESS.
func newError(op string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	e := &Error{Op: op, Code: int(rc), Class: int(rc)}
	var class C.int
	if C.MPI_Error_class(rc, &class) == C.MPI_SUCCESS {
		e.Class = int(class)
	}
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	var n C.int
	if C.MPI_Error_string(rc, &buf[0], &n) == C.MPI_SUCCESS && n > 0 {
		e.Msg = C.GoStringN(&buf[0], n)
		if name := className(e.Class); !strings.HasPrefix(e.Msg, name) {
			e.Msg = name + ": " + e.Msg // MPICH's texts do not name the class
		}
	} else {
		e.Msg = className(e.Class) + ": error code " + strconv.Itoa(int(rc))
	}
	return e
}

// argError is an error this package finds before calling MPI.
func argError(op string, class int, format string, args ...any) error {
	return &Error{Op: op, Code: class, Class: class, Msg: className(class) + ": " + fmt.Sprintf(format, args...)}
}
