// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package bytesize reads and writes numbers of bytes with units, for the
// text tdmpi prints and the sizes its command line accepts: Format writes
// "1.5 MiB" for people, Parse reads "64KiB", "256M" or "1GB", and Exact
// writes the form Parse reads back. Binary units (KiB, MiB, GiB) are powers
// of 1024.
//
// # Files
//
//	bytesize.go  Parse, Format and Exact, and the table of units
package bytesize
