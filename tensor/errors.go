// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensor

import (
	"errors"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// ErrNoMemory is wrapped by the error of an operation whose result (or a
// temporary it needs) would not fit: its element or byte count overflows
// an int, or its bytes are more than the machine (or the process's control
// group) has available. The size is checked before anything is allocated,
// so that a request no machine could meet is an error, as torch raises
// one, and not the Go runtime's fatal "out of memory". It is the same
// value as tensordict.ErrNoMemory.
var ErrNoMemory = mem.ErrNoMemory

// ErrReleased is wrapped by every error about a tensor or storage whose
// Storage was released (a closed memory map, a freed off-heap buffer), so
// callers can test for it with errors.Is.
var ErrReleased = errors.New("storage was released")
