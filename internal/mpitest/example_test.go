// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest_test

import (
	"fmt"
	"time"

	"github.com/tdmpi/tdmpi/internal/mpitest"
)

// Main starts MPI in the TestMain of the package, and Need asks for ranks
// in each test:
//
//	func TestMain(m *testing.M) { mpitest.Main(m) }
//
//	func TestExchange(t *testing.T) {
//		g := mpitest.Need(t, 2)
//		ctx := mpitest.Ctx(t, 10*time.Second)
//		// ... use g and ctx; every rank agrees on the verdict at the end.
//	}
func Example() {
	fmt.Println(mpitest.AgreeTimeout >= 10*time.Second)
	// Output:
	// true
}
