// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"fmt"
	"os"
)

// runHelper runs the helper program mode in a child process and returns
// its exit code.
func runHelper(mode string) int {
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
	return 2
}
