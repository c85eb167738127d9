// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package tensorx is what tdmpi's own packages (tensordict, memmap) use of
// package tensor beyond its public API: views built in memory the caller
// allocates, sets of views laid over storage after storage, and whether a
// storage's memory belongs to the receive pool. Programs see none of it
// in tensor's documentation.
//
// The functions need tensor's unexported fields, and package tensor
// cannot import this package, which names tensor's types. So package
// tensor fills a table of functions in package internal/tensorx/hook at
// its init, and this package takes each out once, typed, when it is
// initialised (after package tensor, which it imports): a call here is
// one call of a function value. A function of tensor whose type differs
// from the one this package expects panics at initialisation, in every
// program and test, never later. (internal/rawbytes, older, hands out
// tensor's storage internals the same way, untyped.)
//
// # Files
//
//	tensorx.go   the functions and ViewSet
//	hook/        the table package tensor fills
package tensorx
