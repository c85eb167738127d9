// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// reduceValue is rank r's element i for op: small values whose products
// fit int8 up to 4 ranks, and zeros among the logical/bitwise operands.
// Logical operands are 0 or 1, since MPI returns a lone operand unchanged.
func reduceValue(op Op, r, i int) int64 {
	if op >= OpLand && op <= OpLxor {
		return int64((r*3 + i) % 4 % 2)
	}
	if op >= OpBand {
		return int64((r*3 + i) % 4)
	}
	return int64((r+i)%3 + 1)
}

// reduceExpect folds the values of ranks 0..upto with op.
func reduceExpect(op Op, upto, i int) int64 {
	acc := reduceValue(op, 0, i)
	nz := func(x int64) int64 {
		if x != 0 {
			return 1
		}
		return 0
	}
	for r := 1; r <= upto; r++ {
		v := reduceValue(op, r, i)
		switch op {
		case OpSum:
			acc += v
		case OpProd:
			acc *= v
		case OpMin:
			acc = min(acc, v)
		case OpMax:
			acc = max(acc, v)
		case OpLand:
			acc &= nz(v)
		case OpLor:
			acc |= nz(v)
		case OpLxor:
			acc ^= nz(v)
		case OpBand:
			acc &= v
		case OpBor:
			acc |= v
		case OpBxor:
			acc ^= v
		}
	}
	return acc
}

func reduceCase[T Scalar](t *testing.T, c *Comm) {
	const n = 11
	r, s := c.Rank(), c.Size()
	root := s - 1
	k := kindOf[T]()
	for op := OpSum; op < nOps; op++ {
		send := fill[T](n, func(i int) int64 { return reduceValue(op, r, i) })
		if !op.validFor(k) {
			assert.ErrorIs(t, Allreduce(c, send, make([]T, n), op), ErrOp, "%v on %v", op, k)
			assert.ErrorIs(t, Reduce(c, send, make([]T, n), op, root), ErrOp, "%v on %v", op, k)
			continue
		}
		want := fill[T](n, func(i int) int64 { return reduceExpect(op, s-1, i) })

		got := make([]T, n)
		assert.NoError(t, Allreduce(c, send, got, op))
		assert.Equal(t, want, got, "Allreduce %v", op)

		inplace := append([]T(nil), send...)
		assert.NoError(t, AllreduceInPlace(c, inplace, op))
		assert.Equal(t, want, inplace, "Allreduce in place %v", op)

		var recv []T
		if r == root {
			recv = make([]T, n)
		}
		assert.NoError(t, Reduce(c, send, recv, op, root))
		if r == root {
			assert.Equal(t, want, recv, "Reduce %v", op)
		}
		inplace = append([]T(nil), send...)
		assert.NoError(t, ReduceInPlace(c, inplace, op, root))
		if r == root {
			assert.Equal(t, want, inplace, "Reduce in place %v", op)
		} else {
			assert.Equal(t, send, inplace, "Reduce in place %v leaves a non-root's buffer alone", op)
		}
		prefix := append([]T(nil), send...)
		assert.NoError(t, ScanInPlace(c, prefix, op))
		assert.Equal(t, fill[T](n, func(i int) int64 { return reduceExpect(op, r, i) }), prefix, "Scan in place %v", op)

		prefix = make([]T, n)
		assert.NoError(t, Scan(c, send, prefix, op))
		assert.Equal(t, fill[T](n, func(i int) int64 { return reduceExpect(op, r, i) }), prefix, "Scan %v", op)
	}
}

func TestReduceAllOpsAllTypes(t *testing.T) {
	c := testComm(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *Comm)
	}{
		{"bool", reduceCase[bool]},
		{"myBool", reduceCase[myBool]},
		{"int8", reduceCase[int8]},
		{"uint8", reduceCase[uint8]},
		{"int16", reduceCase[int16]},
		{"uint16", reduceCase[uint16]},
		{"int32", reduceCase[int32]},
		{"uint32", reduceCase[uint32]},
		{"int64", reduceCase[int64]},
		{"uint64", reduceCase[uint64]},
		{"int", reduceCase[int]},
		{"uint", reduceCase[uint]},
		{"float32", reduceCase[float32]},
		{"float64", reduceCase[float64]},
		{"myFloat", reduceCase[myFloat]},
		{"complex64", reduceCase[complex64]},
		{"complex128", reduceCase[complex128]},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, c) })
	}
}

func TestReduceComplex(t *testing.T) {
	c := testComm(t)
	r, s := c.Rank(), c.Size()
	x := []complex128{complex(float64(r), 1), 1i}
	got := make([]complex128, 2)
	assert.NoError(t, Allreduce(c, x, got, OpSum))
	assert.Equal(t, []complex128{complex(float64(s*(s-1)/2), float64(s)), complex(0, float64(s))}, got)
	assert.NoError(t, Allreduce(c, []complex128{1i, 2}, got, OpProd))
	want := []complex128{1, 1}
	for range s {
		want[0] *= 1i
		want[1] *= 2
	}
	assert.Equal(t, want, got)
}

func TestReduceArgs(t *testing.T) {
	c := World()
	r, s := c.Rank(), c.Size()
	assert.ErrorIs(t, Reduce(c, []int{1}, []int{1}, OpSum, s), ErrRoot)
	if r == 0 {
		assert.ErrorIs(t, Reduce(c, []int{1}, []int{1, 2}, OpSum, 0), ErrBuffer)
		assert.ErrorIs(t, Reduce[int](c, nil, []int{1}, OpSum, 0), ErrBuffer, "nil is an empty buffer, not in place")
	}
	assert.ErrorIs(t, Allreduce[int](c, nil, []int{1}, OpSum), ErrBuffer, "nil is an empty buffer, not in place")
	assert.ErrorIs(t, Scan(c, []int{1}, nil, OpSum), ErrBuffer)
}

// TestReduceInPlaceRoots reduces in place at every root, at sizes where
// MPICH 4.0's MPI_Reduce crashed on MPI_IN_PLACE at a root other than 0.
func TestReduceInPlaceRoots(t *testing.T) {
	c := World()
	r, s := c.Rank(), c.Size()
	for _, n := range []int{100, 2000, 16388} {
		for root := range s {
			buf := fill[float32](n, func(i int) int64 { return int64(r + i%7) })
			assert.NoError(t, ReduceInPlace(c, buf, OpSum, root))
			want := fill[float32](n, func(i int) int64 { return int64(s*(s-1)/2 + s*(i%7)) })
			if r != root {
				want = fill[float32](n, func(i int) int64 { return int64(r + i%7) })
			}
			assert.Equal(t, want, buf, "n=%d root=%d", n, root)
		}
	}
}
