// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// Multi-rank tests keep every rank on the same sequence of collective
// calls: value checks use assert (which does not stop the test), and an
// early exit happens only on errors that every rank sees alike.

// testComm returns a duplicate of World for one test, so that no message
// of one test can match a receive of another. It is freed at cleanup.
func testComm(t *testing.T) *Comm {
	t.Helper()
	c, err := World().Dup()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Free()) })
	return c
}

// needRanks skips t unless World has at least n processes.
func needRanks(t *testing.T, n int) {
	t.Helper()
	if s := World().Size(); s < n {
		t.Skipf("needs %d ranks, World has %d (run under mpirun -np %d)", n, s, n)
	}
}

// fromInt converts a small integer to T (bool: x != 0; complex: real part).
func fromInt[T Scalar](x int64) T {
	var z T
	v := reflect.ValueOf(&z).Elem()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(x != 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(x))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(x))
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(complex(float64(x), 0))
	}
	return z
}

// fill returns n elements of T with values f(i).
func fill[T Scalar](n int, f func(i int) int64) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = fromInt[T](f(i))
	}
	return s
}

// myBool is a named type, to check that named element types work.
type myBool bool

// myFloat is a named float type.
type myFloat float64
