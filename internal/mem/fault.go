// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrFault is wrapped by the errors of CatchFault: an access to memory
// that is no longer backed, such as a page of a file mapping beyond the
// end of a file another process truncated (which the kernel reports with
// SIGBUS).
var ErrFault = errors.New("memory fault (was a mapped file truncated?)")

// FaultError reports a memory fault caught by CatchFault.
type FaultError struct {
	Addr uintptr // faulting address
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("mem: fault at address %#x: %v", e.Addr, ErrFault)
}

// Is makes errors.Is(err, ErrFault) true.
func (e *FaultError) Is(target error) bool { return target == ErrFault }

// CatchFault runs f with the runtime's panic-on-fault mode on
// (debug.SetPanicOnFault) and returns f's error, or an error wrapping
// ErrFault if f faulted at a non-nil address. Only faults in Go code of
// the calling goroutine are caught: a goroutine f starts must call
// CatchFault itself, and a fault inside C code (MPI) still ends the
// process. Other panics go on unchanged.
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
		if a, ok := r.(interface{ Addr() uintptr }); ok {
			if _, isErr := r.(error); isErr {
				err = &FaultError{Addr: a.Addr()}
				return
			}
		}
		panic(r)
	}()
	return f()
}
