// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package testfs gives tests real file systems with properties a test
// needs, such as one that fills up: disk-full paths are tested against a
// real kernel, not a fake.
//
// # Files
//
//	tmpfs.go  Tmpfs: a small tmpfs that fills up, for disk-full tests
package testfs
