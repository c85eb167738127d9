// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import (
	"errors"
	"fmt"
)

// ErrNoMemory is wrapped by the errors of CheckAvailable and AllocChecked:
// the machine (or the process's control group) does not have the memory
// asked for.
var ErrNoMemory = errors.New("not enough memory available")

// CheckMin is the smallest request CheckAvailable looks into: below it the
// check costs more than it can save, and a failed allocation of that size
// would mean the process is about to die anyway.
const CheckMin = 64 << 20

// NoMemoryError reports a request for more memory than is available.
type NoMemoryError struct {
	Want      int64 // bytes asked for
	Available int64 // bytes available when asked
	Source    string
}

func (e *NoMemoryError) Error() string {
	return fmt.Sprintf("mem: %d bytes asked for, %d available (%s): %v", e.Want, e.Available, e.Source, ErrNoMemory)
}

// Is makes errors.Is(err, ErrNoMemory) true.
func (e *NoMemoryError) Is(target error) bool { return target == ErrNoMemory }

// CheckAvailable returns an error wrapping ErrNoMemory if n bytes are more
// than this process can allocate now without the kernel's out-of-memory
// killer or the Go runtime's fatal "out of memory" (see Available). Requests
// below CheckMin, and machines where the amount cannot be read, pass.
//
// It is a check, not a reservation: memory that other processes take after
// it is gone. A request that passes can still fail later, under memory
// pressure; one that fails could not have succeeded when it was made.
func CheckAvailable(n int64) error {
	if n < CheckMin {
		return nil
	}
	avail, src, ok := Available()
	if !ok || n <= avail {
		return nil
	}
	return &NoMemoryError{Want: n, Available: avail, Source: src}
}

// AllocChecked is AllocUninit after CheckAvailable: it returns an error
// wrapping ErrNoMemory instead of letting the Go runtime die of a request
// the machine cannot meet.
func AllocChecked(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("mem: AllocChecked: negative size %d", n)
	}
	if err := CheckAvailable(int64(n)); err != nil {
		return nil, err
	}
	return AllocUninit(n), nil
}
