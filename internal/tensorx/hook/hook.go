// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package hook is the table through which package tensor hands package
// internal/tensorx what only tdmpi's own packages use of it. Package
// tensor imports it and fills it in its init; tensorx, which imports
// tensor, reads it once at its own initialisation, so that no program
// sees these functions in tensor's API. Nothing else uses this package.
//
// Each variable holds a function of package tensor of the type that
// tensorx asserts (its signature names tensor's types, which this package
// cannot import): see the tensorx function of the same name.
package hook

// The functions of package tensor behind internal/tensorx's of the same
// names. NewViewSet returns its set as an any, which tensorx asserts to
// its ViewSet interface.
var (
	FromStorageInto any
	NewViewSet      any
	Reusable        any
)
