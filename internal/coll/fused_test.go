// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// fusedPair returns the fused buffers of two ranks whose leaf is x and y
// (tensors of one dtype), with signature sig and no flags.
func fusedPair(t *testing.T, sig uint64, x, y *tensor.Tensor) (lo, hi []byte) {
	t.Helper()
	mk := func(v *tensor.Tensor) []byte {
		b := WordsAsBytes(make([]uint64, (fusedHead+v.NBytes()+7)/8))
		binary.NativeEndian.PutUint64(b[8:], sig)
		require.NoError(t, copyOut(b[fusedHead:], v))
		return b
	}
	return mk(x), mk(y)
}

// vec returns the float64 vector v.
func vec(t *testing.T, v []float64) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromSlice(v, len(v))
	require.NoError(t, err)
	return x
}

// TestSteadyCombine combines two ranks' fused buffers: each dtype and op
// as the MPI reduction of the long way would (integers wrap, bool is
// logical), flags ORed, and a signature that differs flagged, the
// elements left alone.
func TestSteadyCombine(t *testing.T) {
	for _, tc := range []struct {
		dt         tensor.DType
		op         Op
		x, y, want []float64
	}{
		{tensor.Float64, Sum, []float64{1.5, -2}, []float64{2, 3}, []float64{3.5, 1}},
		{tensor.Float64, Avg, []float64{1.5, -2}, []float64{2, 3}, []float64{3.5, 1}}, // divided later
		{tensor.Float32, Prod, []float64{1.5, -2}, []float64{2, 3}, []float64{3, -6}},
		{tensor.Float32, Min, []float64{1.5, -2}, []float64{2, 3}, []float64{1.5, -2}},
		{tensor.Int64, Max, []float64{1, -2}, []float64{2, -3}, []float64{2, -2}},
		{tensor.Int32, BitAnd, []float64{6, 5}, []float64{3, 4}, []float64{2, 4}},
		{tensor.Int16, BitOr, []float64{6, 5}, []float64{3, 4}, []float64{7, 5}},
		{tensor.Int8, Sum, []float64{100, -100}, []float64{100, -100}, []float64{-56, 56}},
		{tensor.Uint8, BitXor, []float64{6, 5}, []float64{3, 4}, []float64{5, 1}},
		{tensor.Uint8, Sum, []float64{200, 1}, []float64{100, 2}, []float64{44, 3}},
		{tensor.Bool, Sum, []float64{1, 0, 0}, []float64{0, 1, 0}, []float64{1, 1, 0}},
		{tensor.Bool, Min, []float64{1, 0, 1}, []float64{1, 1, 0}, []float64{1, 0, 0}},
		{tensor.Bool, BitXor, []float64{1, 0, 1}, []float64{1, 1, 0}, []float64{0, 1, 1}},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.dt, tc.op), func(t *testing.T) {
			st := &steady{sig: 7, inline: true, dt: tc.dt, op: tc.op}
			x, y := vec(t, tc.x).To(tc.dt), vec(t, tc.y).To(tc.dt)
			lo, hi := fusedPair(t, 7, x, y)
			st.combine(lo, hi)
			assert.Zero(t, binary.NativeEndian.Uint64(hi), "flags")
			got, err := tensor.FromBytes(tc.dt, hi[fusedHead:fusedHead+x.NBytes()], len(tc.x))
			require.NoError(t, err)
			want := vec(t, tc.want).To(tc.dt)
			assert.True(t, got.Equal(want), "got %v, want %v", got, want)
		})
	}
	t.Run("flags", func(t *testing.T) {
		st := &steady{sig: 7, inline: true, dt: tensor.Float64, op: Sum}
		x := vec(t, []float64{1, 2})
		for _, c := range []struct {
			sigLo, flagsLo, flagsHi, want uint64
		}{
			{7, fusedChanged, 0, fusedChanged},
			{7, 0, fusedChanged, fusedChanged},
			{8, 0, 0, fusedMismatch},
			{8, fusedChanged, 0, fusedChanged | fusedMismatch},
		} {
			lo, hi := fusedPair(t, 7, x, x)
			binary.NativeEndian.PutUint64(lo, c.flagsLo)
			binary.NativeEndian.PutUint64(lo[8:], c.sigLo)
			binary.NativeEndian.PutUint64(hi, c.flagsHi)
			st.combine(lo, hi)
			assert.Equal(t, c.want, binary.NativeEndian.Uint64(hi), "%+v", c)
			assert.Equal(t, 1.0, math.Float64frombits(binary.NativeEndian.Uint64(hi[fusedHead:])), "%+v: elements left alone", c)
		}
		lo, hi := fusedPair(t, 7, x, x)
		binary.NativeEndian.PutUint64(lo, fusedBounded)
		st.combine(lo, hi)
		assert.Equal(t, uint64(fusedBounded), binary.NativeEndian.Uint64(hi), "bounded")
		assert.Equal(t, 2.0, math.Float64frombits(binary.NativeEndian.Uint64(hi[fusedHead:])), "bounded: elements combined")
	})
}

// TestSteadySig: which reductions travel inline, and that the
// signatures tell apart what the ranks must agree on.
func TestSteadySig(t *testing.T) {
	plan := func(xs ...*tensor.Tensor) *Reduction {
		return PlanReduction(xs, func(i int) any { return i })
	}
	f32 := plan(tensor.Full(tensor.Float32, 1, 4), tensor.Full(tensor.Float32, 1, 2))
	for _, c := range []struct {
		name   string
		r      *Reduction
		op     Op
		inline bool
	}{
		{"float32 sum", f32, Sum, true},
		{"float32 avg", f32, Avg, true},
		{"float32 band", f32, BitAnd, false},
		{"two dtypes", plan(tensor.Full(tensor.Float32, 1, 4), tensor.Full(tensor.Int64, 1, 2)), Sum, false},
		{"half", plan(tensor.Full(tensor.Float16, 1, 4)), Sum, false},
		{"complex", plan(tensor.Full(tensor.Complex64, 1, 4)), Sum, false},
		{"largest", plan(tensor.Full(tensor.Uint8, 1, fusedMax)), Sum, true},
		{"too large", plan(tensor.Full(tensor.Uint8, 1, fusedMax+1)), Sum, false},
	} {
		sig, inline := c.r.steadySig(c.op, -1, 1)
		assert.Equal(t, c.inline, inline, c.name)
		assert.NotZero(t, sig, c.name)
	}
	sig, _ := (*Reduction)(nil).steadySig(Sum, -1, 1)
	assert.Zero(t, sig, "no leaves")

	st := tensor.Full(tensor.Float32, 1, 6).Storage()
	a, err := tensor.FromStorage(tensor.Float32, st, 0, 4)
	require.NoError(t, err)
	b, err := tensor.FromStorage(tensor.Float32, st, 16, 2)
	require.NoError(t, err)
	sigs := map[uint64]string{}
	for name, r := range map[string]*Reduction{
		"sum":         f32,
		"int32":       plan(tensor.Full(tensor.Int32, 1, 4), tensor.Full(tensor.Int32, 1, 2)),
		"one storage": plan(a, b),
	} {
		s, _ := r.steadySig(Sum, -1, 1)
		sigs[s] = name
	}
	s1, _ := f32.steadySig(Max, -1, 1)
	s2, _ := f32.steadySig(Sum, -1, 2)
	s3, _ := f32.steadySig(Sum, 0, 1)
	sigs[s1], sigs[s2], sigs[s3] = "max", "hash", "root"
	assert.Len(t, sigs, 6, "op, root, structure hash, dtype and layout change the signature: %v", sigs)
}
