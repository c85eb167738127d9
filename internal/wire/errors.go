// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"errors"
	"fmt"
)

// ErrLimit matches every *LimitError with errors.Is.
var ErrLimit = errors.New("wire: limit exceeded")

// ErrHeader matches every *HeaderError with errors.Is.
var ErrHeader = errors.New("wire: malformed header")

// HeaderError reports a malformed header: a field with an impossible value.
type HeaderError struct {
	Field  string // header field, such as "magic" or "total"
	Reason string
}

func (e *HeaderError) Error() string {
	return "wire: header " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrHeader) true.
func (e *HeaderError) Is(target error) bool { return target == ErrHeader }

// LimitError reports a header field that exceeds the receiver's limit.
type LimitError struct {
	Field string // header field, such as "total"
	Value int64  // what the peer announced
	Limit int64  // what the receiver accepts
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("wire: header %s %d bytes exceeds the limit of %d bytes", e.Field, e.Value, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }
