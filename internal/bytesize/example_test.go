// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package bytesize_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/bytesize"
)

func Example() {
	n, err := bytesize.Parse("1536 KiB")
	fmt.Println(n, err)
	fmt.Println(bytesize.Format(n), bytesize.Exact(n))
	// Output:
	// 1572864 <nil>
	// 1.5 MiB 1536KiB
}
