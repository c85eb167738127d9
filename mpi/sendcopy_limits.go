// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import "github.com/tdmpi/tdmpi/internal/mpix/hook"

// copySendMax is the largest message sendCopy sends (see hook.CopySendMax).
const copySendMax = hook.CopySendMax
