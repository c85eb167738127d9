// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

func TestMain(m *testing.M) { mpitest.Main(m) }

// testErrors stands for package tensordict's error types.
var testErrors = Errors{
	Peer: func(op string, rank int, msg string) error { return fmt.Errorf("peer %d: %s", rank, msg) },
	Structure: func(op string, ref, rank int, key []string, detail string) error {
		return fmt.Errorf("structure of %d against %d at %v: %s: %w", rank, ref, key, detail, ErrMismatch)
	},
}

// run runs f as the collective op on the world, as package tensordict
// does, blocking.
func run(t *testing.T, op string, f func(cl *Call) error) error {
	t.Helper()
	g := mpitest.Need(t, 1)
	_, err := Start(context.Background(), g, &Call{Op: op, Errors: &testErrors}, -1, nil, f)
	return err
}

// TestOpCheck checks which dtypes each reduction applies to.
func TestOpCheck(t *testing.T) {
	for _, dt := range tensor.DTypes() {
		for op := Sum; op < numOps; op++ {
			var want bool
			switch op {
			case Sum, Prod:
				want = true
			case Min, Max:
				want = !dt.IsComplex()
			case Avg:
				want = dt.IsFloat() || dt.IsComplex()
			default:
				want = dt == tensor.Bool || dt.IsInteger()
			}
			err := opCheck(op, dt)
			assert.Equal(t, want, err == nil, "%v on %v: %v", op, dt, err)
		}
	}
	assert.ErrorContains(t, opCheck(Op(99), tensor.Float32), "invalid reduce operation ReduceOp(99)")
	assert.Equal(t, "bxor", BitXor.String())
}

// reduceWant returns the reduction with op of rank r's value r+1 (for
// bool: true on rank 0 only) over n ranks.
func reduceWant(op Op, dt tensor.DType, n int) float64 {
	if dt == tensor.Bool {
		switch op {
		case Prod, Min, BitAnd:
			return map[bool]float64{true: 1, false: 0}[n == 1]
		}
		return 1
	}
	w := float64(1)
	switch op {
	case Sum, Avg:
		w = float64(n * (n + 1) / 2)
		if op == Avg {
			w /= float64(n)
		}
	case Prod:
		for r := 2; r <= n; r++ {
			w *= float64(r)
		}
	case Max:
		w = float64(n)
	case BitAnd, BitOr, BitXor:
		v := 1
		for r := 2; r <= n; r++ {
			v = map[Op]func(a, b int) int{BitAnd: func(a, b int) int { return a & b }, BitOr: func(a, b int) int { return a | b }, BitXor: func(a, b int) int { return a ^ b }}[op](v, r)
		}
		w = float64(v)
	}
	return w
}

// TestReduceKernels reduces, with every op, leaves of every dtype it
// applies to: one leaf alone (the fast path, one span), and a leaf beside
// a strided view of another, in one bucket (copied out and back). Every
// rank r contributes r+1. Run under mpirun to reduce between ranks.
func TestReduceKernels(t *testing.T) {
	g := mpitest.Need(t, 1)
	n, r := g.Size(), g.Rank()
	for _, dt := range tensor.DTypes() {
		for op := Sum; op < numOps; op++ {
			if opCheck(op, dt) != nil {
				continue
			}
			mpitest.Run(t, fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				v := float64(r + 1)
				if dt == tensor.Bool {
					v = map[bool]float64{true: 1, false: 0}[r == 0]
				}
				one := tensor.Full(dt, v, 3, 5)
				base := tensor.Full(dt, v, 4, 6)
				view, err := base.Slice(1, 0, 6, 2)
				require.NoError(t, err)
				for _, leaves := range [][]*tensor.Tensor{{one}, {tensor.Full(dt, v, 7), view}} {
					red := PlanReduction(leaves, func(i int) any { return i })
					require.Equal(t, len(leaves) == 1, red.fast)
					require.NoError(t, run(t, "AllReduce", func(cl *Call) error {
						return cl.Reduce(red, op, -1, nil, 1, nil)
					}))
					want := reduceWant(op, dt, n)
					for i, x := range leaves {
						ok, err := x.AllClose(tensor.Full(dt, want, x.Shape()...), 1e-2, 0)
						require.NoError(t, err)
						assert.True(t, ok, "leaf %d: %v, want %v", i, x, want)
					}
				}
				odd, err := base.Slice(1, 1, 6, 2)
				require.NoError(t, err)
				assert.True(t, odd.EqScalar(v).All(), "elements outside the view are left alone")
			})
		}
	}
}

// TestReduceHalfAvg averages half-precision values whose sum over two
// ranks or more overflows the dtype (float16) or even float32 (bfloat16):
// every rank divides before the sum, and the mean survives.
func TestReduceHalfAvg(t *testing.T) {
	g := mpitest.Need(t, 1)
	for _, c := range []struct {
		dt tensor.DType
		v  float64
	}{{tensor.Float16, 60000}, {tensor.BFloat16, 3e38}} {
		mpitest.Run(t, c.dt.String(), func(t *testing.T) {
			x := tensor.Full(c.dt, c.v, 3, 1000)
			y := tensor.Full(c.dt, c.v, 9)
			red := PlanReduction([]*tensor.Tensor{x, y}, func(i int) any { return i })
			require.NoError(t, run(t, "AllReduce", func(cl *Call) error {
				return cl.Reduce(red, Avg, -1, nil, 0, nil)
			}))
			for _, z := range []*tensor.Tensor{x, y} {
				ok, err := z.AllClose(tensor.Full(c.dt, c.v, z.Shape()...), 1e-2, 0)
				require.NoError(t, err)
				assert.True(t, ok, "mean over %d ranks: %v", g.Size(), z)
			}
		})
	}
}

// TestReduceToRoot reduces to the last rank: only it gets the sum.
func TestReduceToRoot(t *testing.T) {
	g := mpitest.Need(t, 1)
	n, r := g.Size(), g.Rank()
	x := tensor.Full(tensor.Int32, float64(r+1), 4)
	red := PlanReduction([]*tensor.Tensor{x}, func(i int) any { return i })
	require.NoError(t, run(t, "Reduce", func(cl *Call) error { return cl.Reduce(red, Sum, n-1, nil, 0, nil) }))
	want := float64(r + 1)
	if r == n-1 {
		want = float64(n * (n + 1) / 2)
	}
	assert.True(t, x.EqScalar(want).All(), "%v", x)
}

// TestReduceRefused checks the agreement before a reduction: a rank's own
// error fails every rank (the others with the Peer error), and so does a
// structure hash that differs, explained from the descriptions.
func TestReduceRefused(t *testing.T) {
	g := mpitest.Need(t, 1)
	n, r := g.Size(), g.Rank()
	x := tensor.Full(tensor.Float32, 1, 4)
	red := PlanReduction([]*tensor.Tensor{x}, func(i int) any { return i })
	mpitest.Run(t, "failed", func(t *testing.T) {
		var local error
		if r == n-1 {
			local = errors.New("bad leaf")
		}
		err := run(t, "AllReduce", func(cl *Call) error { return cl.Reduce(red, Sum, -1, local, 0, nil) })
		require.Error(t, err)
		if r == n-1 {
			assert.ErrorContains(t, err, fmt.Sprintf("tensordict: AllReduce: rank %d of %d: bad leaf", r, n))
		} else {
			assert.ErrorContains(t, err, fmt.Sprintf("peer %d: bad leaf", n-1))
		}
		assert.True(t, x.EqScalar(1).All(), "nothing reduced")
	})
	mpitest.Run(t, "structure", func(t *testing.T) {
		if n < 2 {
			t.Skip("needs two ranks")
		}
		d := codec.Structure{Batch: []int{4}, Leaves: []codec.StructLeaf{{Key: codec.Key{"a"}, DType: tensor.Float32, Shape: []int{4}}}}
		if r == 1 {
			d.Leaves[0].Shape = []int{5}
		}
		err := run(t, "AllReduce", func(cl *Call) error {
			return cl.Reduce(red, Sum, -1, nil, d.Hash(codec.SortedOrder), func() codec.Structure { return d })
		})
		assert.ErrorIs(t, err, ErrMismatch)
		assert.ErrorContains(t, err, "structure of 1 against 0 at [a]: float32[5] on rank 1, float32[4] on rank 0")
	})
}

// opCheck returns the error of op on dt.
func opCheck(op Op, dt tensor.DType) error {
	_, err := op.mpiOp(dt)
	return err
}
