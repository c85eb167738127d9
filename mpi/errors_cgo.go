// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

// #include "shim.h"
import "C"

import (
	"fmt"
	"strconv"
	"strings"
)

// Error classes, as the MPI library numbers them.
const (
	classSuccess              = C.MPI_SUCCESS
	classBuffer               = C.MPI_ERR_BUFFER
	classCount                = C.MPI_ERR_COUNT
	classType                 = C.MPI_ERR_TYPE
	classTag                  = C.MPI_ERR_TAG
	classComm                 = C.MPI_ERR_COMM
	classRank                 = C.MPI_ERR_RANK
	classRequest              = C.MPI_ERR_REQUEST
	classRoot                 = C.MPI_ERR_ROOT
	classGroup                = C.MPI_ERR_GROUP
	classOp                   = C.MPI_ERR_OP
	classTopology             = C.MPI_ERR_TOPOLOGY
	classDims                 = C.MPI_ERR_DIMS
	classArg                  = C.MPI_ERR_ARG
	classUnknown              = C.MPI_ERR_UNKNOWN
	classTruncate             = C.MPI_ERR_TRUNCATE
	classOther                = C.MPI_ERR_OTHER
	classIntern               = C.MPI_ERR_INTERN
	classInStatus             = C.MPI_ERR_IN_STATUS
	classPending              = C.MPI_ERR_PENDING
	classNoMem                = C.MPI_ERR_NO_MEM
	classNotSame              = C.MPI_ERR_NOT_SAME
	classUnsupportedOperation = C.MPI_ERR_UNSUPPORTED_OPERATION
)

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
