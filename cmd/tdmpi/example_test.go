// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"fmt"
	"os"
)

// The memmap directory Python tensordict's tests keep as an artifact,
// printed as tdmpi inspect prints it.
func Example_inspect() {
	code := run([]string{"inspect", "../../testdata/tensordict/mmap_example"}, &stdio{out: os.Stdout, err: os.Stdout})
	fmt.Println("exit status", code)
	// Output:
	// ../../testdata/tensordict/mmap_example: memmap, batch size [2 1], 2 tensor leaves, 20 B
	// KEY           TYPE        SHAPE  BYTES  VALUES
	// nested        TensorDict  [2 1]
	// ├── int64     int64       [2 1]  16 B   [1 2]
	// ├── string    non-tensor                ["a string!"]
	// └── bfloat16  bfloat16    [2 1]  4 B    [1 1]
	// exit status 0
}

// A usage error: exit status 2, and a hint on standard error.
func Example_usageError() {
	code := run([]string{"inspect"}, &stdio{out: os.Stdout, err: os.Stdout})
	fmt.Println("exit status", code)
	// Output:
	// tdmpi inspect: want one DIR or FILE, have 0 arguments
	// Run 'tdmpi inspect -h' for usage.
	// exit status 2
}
