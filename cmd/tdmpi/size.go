// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import "github.com/tdmpi/tdmpi/internal/bytesize"

// byteSize is a number of bytes given on the command line, as "8B",
// "64KiB" or "256MiB". It implements flag.Value.
type byteSize int64

// String returns the size in the form Set reads back, such as "64KiB".
func (b *byteSize) String() string {
	if b == nil {
		return "0B"
	}
	return bytesize.Exact(int64(*b))
}

// Set parses s with bytesize.Parse.
func (b *byteSize) Set(s string) error {
	n, err := bytesize.Parse(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}
