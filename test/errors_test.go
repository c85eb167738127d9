// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import "errors"

// Classes of soak failures.
var (
	errMisrouted = errors.New("lost, duplicated or misrouted message")
	errCorrupt   = errors.New("corrupted payload")
)
