// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build !linux

package mem

// adviseNoHuge does nothing: transparent huge pages are a Linux feature.
func adviseNoHuge([]byte) {}

// freshHuge does nothing: transparent huge pages are a Linux feature.
func freshHuge([]byte) {}

// dropInterior does nothing: elsewhere no page size is advised, and
// nothing needs pages faulted in afresh.
func dropInterior([]byte) {}

// adviseAround does nothing: transparent huge pages are a Linux feature.
func adviseAround([]byte) {}
