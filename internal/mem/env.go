// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import "os"

// hugeOn is false when the environment variable TDMPI_HUGEPAGES is "0":
// Huge then advises nothing.
var hugeOn = os.Getenv("TDMPI_HUGEPAGES") != "0"
