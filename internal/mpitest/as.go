// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

// As converts a list of values to the type T, such as a list of
// communication options to the option family of the method it is passed
// to (tensordict's options are one interface per family of methods, and Go
// slices do not convert). It panics on a value that is not a T, which no
// test means to pass.
func As[T any](in []any) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = v.(T)
	}
	return out
}
