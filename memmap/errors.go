// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package memmap

import (
	"errors"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// ErrFault is wrapped by the errors of Guard, and of the functions of
// packages memmap and tensordict that read or write mapped memory
// themselves, when the memory faulted: a page past the end of a file that
// another process truncated after it was mapped (which the kernel reports
// with SIGBUS).
var ErrFault = mem.ErrFault

// ErrHardLink is wrapped by the error of FromFile (and so of a
// LoadMemmap) that refuses to map shared a file with more than one hard
// link; see HardLinks.
var ErrHardLink = errors.New("file has more than one hard link")
