// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !linux

package mem

// Available reports that the available memory is unknown: only Linux's is
// read.
func Available() (avail int64, source string, ok bool) { return 0, "", false }

// Physical returns 0: only Linux's memory size is read.
func Physical() int64 { return 0 }
