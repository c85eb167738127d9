// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import (
	"errors"
	"fmt"
)

// Errors matched with errors.Is.
var (
	// ErrPickle is wrapped by every error about a malformed pickle:
	// truncated, unbalanced, or past a limit.
	ErrPickle = errors.New("invalid pickle")

	// ErrOpcode is wrapped by the error about an opcode the decoder
	// refuses (see OpcodeError).
	ErrOpcode = errors.New("pickle opcode not allowed")

	// ErrLimit is wrapped by errors about a pickle or a description past
	// a bound of Limits.
	ErrLimit = errors.New("over a limit")

	// ErrMetadata is wrapped by every error about a metadata description
	// that is not what tensordict sends; the error names the key.
	ErrMetadata = errors.New("invalid tensordict metadata")
)

// OpcodeError reports an opcode the restricted decoder refuses: every
// opcode that names, calls or builds a Python object (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, ...), and every opcode
// that tensordict's metadata never needs (bytes, sets, protocol-0 text
// forms, ...).
type OpcodeError struct {
	Op  byte // the opcode byte
	Pos int  // its offset in the pickle
}

func (e *OpcodeError) Error() string {
	return fmt.Sprintf("torchwire: pickle opcode %s (0x%02x) at byte %d is not allowed: tensordict metadata holds only dicts, lists, tuples, str, int, float, bool and None",
		OpName(e.Op), e.Op, e.Pos)
}

// Is makes errors.Is(err, ErrOpcode) true.
func (e *OpcodeError) Is(target error) bool { return target == ErrOpcode }

// pickleErr returns "torchwire: pickle byte <pos>: <msg>" wrapping ErrPickle.
func pickleErr(pos int, format string, args ...any) error {
	return fmt.Errorf("torchwire: pickle byte %d: %s: %w", pos, fmt.Sprintf(format, args...), ErrPickle)
}

// limitErr returns "torchwire: pickle byte <pos>: <msg>" wrapping ErrLimit.
func limitErr(pos int, format string, args ...any) error {
	return fmt.Errorf("torchwire: pickle byte %d: %s: %w", pos, fmt.Sprintf(format, args...), ErrLimit)
}
