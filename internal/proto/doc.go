// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package proto is what tdmpi's protocol packages (tensordict,
// internal/xfer) use of a group beyond its public API: the library
// communicator and its tags, the protocol lock, the broken and departed
// states, and the per-group protocol state (Slot). Programs see none of
// it: package group keeps the state and registers, in its init, the
// accessor (Register) through which this package reaches it, since this
// package cannot import group (group imports it for the tag layout).
//
// Every function taking a Group wants a *group.Group; any other value
// panics, as a programmer's error in the library would.
//
// # Files
//
//	proto.go  State, Register, and the functions on a group's state
//	slot.go   Slot: one kind of per-group protocol state
//	tags.go   the header tags of the library communicator
package proto
