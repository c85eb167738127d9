// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// ErrFault is wrapped by the errors of CatchFault: an access to memory
// that is no longer backed, such as a page of a file mapping beyond the
// end of a file another process truncated (which the kernel reports with
// SIGBUS).
var ErrFault = errors.New("memory fault (was a mapped file truncated?)")

// FaultError reports a memory fault caught by CatchFault or raised by
// PanicOnFault.
type FaultError struct {
	Op   string  // the operation that faulted, if known ("tensordict: Clone")
	Addr uintptr // faulting address
}

func (e *FaultError) Error() string {
	if e.Op != "" {
		return fmt.Sprintf("%s: fault at address %#x: %v", e.Op, e.Addr, ErrFault)
	}
	return fmt.Sprintf("mem: fault at address %#x: %v", e.Addr, ErrFault)
}

// Is makes errors.Is(err, ErrFault) true.
func (e *FaultError) Is(target error) bool { return target == ErrFault }

// CatchFault runs f with the runtime's panic-on-fault mode on
// (debug.SetPanicOnFault) and returns f's error, or an error wrapping
// ErrFault if f faulted at a non-nil address or panicked with a
// *FaultError (see PanicOnFault). Only faults in Go code of the calling
// goroutine are caught: a goroutine f starts must call CatchFault itself,
// and a fault inside C code (MPI) still ends the process. Other panics go
// on unchanged.
//
// Code that faults may leave its data half written; CatchFault only keeps
// the process alive to report it.
func CatchFault(f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		if fe := asFault(r); fe != nil {
			err = fe
			return
		}
		panic(r)
	}()
	return f()
}

// asFault returns the *FaultError that the recovered panic value r
// reports, or nil if r is not a memory fault.
func asFault(r any) *FaultError {
	if fe, ok := r.(*FaultError); ok {
		return fe
	}
	if a, ok := r.(interface{ Addr() uintptr }); ok {
		if _, isErr := r.(error); isErr {
			return &FaultError{Addr: a.Addr()}
		}
	}
	return nil
}

// PanicOnFault runs f, which cannot return an error, with the runtime's
// panic-on-fault mode on: a fault in Go code of f on the calling
// goroutine (a page of a file another process truncated) panics with a
// *FaultError naming op, an error wrapping ErrFault, instead of ending
// the process with SIGBUS. The caller can recover it, and CatchFault
// (memmap.Guard) around the call returns it as its error. Other panics go
// on unchanged.
func PanicOnFault(op string, f func()) {
	err := CatchFault(func() error { f(); return nil })
	if fe, ok := err.(*FaultError); ok {
		if fe.Op == "" {
			fe.Op = op
		}
		panic(fe)
	}
}

// Readable returns nil if every page of b can be read, and otherwise an
// error wrapping ErrFault, without ending the process: it reads b's last
// byte under CatchFault. For b within one file mapping, that one byte
// decides: a page faults only when the file ends before the page, and the
// last page is the first to go when the file shrinks. It is how memory
// that C code (an MPI transfer) will read or write is checked first, since
// a fault there cannot be caught. The check is a snapshot: a file
// truncated right after it still faults in C.
func Readable(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return CatchFault(func() error {
		ReadLast(b)
		return nil
	})
}

// ReadLast reads b's last byte, if any: Readable's check, for a caller
// already under CatchFault.
func ReadLast(b []byte) {
	if len(b) > 0 {
		runtime.KeepAlive(b[len(b)-1])
	}
}
