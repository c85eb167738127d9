// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestPlanSteps checks how a reduction step by step groups the leaves:
// dtype by dtype in dtype order, in the given order within a dtype,
// large leaves alone, small ones in buckets of at most bucketBytes (a
// bucket of one leaf being that leaf alone), empty leaves left out.
func TestPlanSteps(t *testing.T) {
	big := BucketLeafMax / 4 // float32 elements of a leaf reduced alone
	perBucket := bucketBytes / BucketLeafMax
	full := map[string]*tensor.Tensor{"z1": tensor.Full(tensor.Float64, 1, 1), "z2": tensor.Full(tensor.Float64, 1, 1)}
	var fullKeys []string
	for i := range perBucket + 1 {
		k := fmt.Sprintf("k%02d", i)
		full[k] = tensor.Full(tensor.Float64, 1, BucketLeafMax/8-1)
		fullKeys = append(fullKeys, k)
	}
	for _, c := range []struct {
		name   string
		leaves map[string]*tensor.Tensor
		want   []string // "key,key/bytes" per step, 0 bytes for a leaf alone
	}{
		{name: "one small leaf", leaves: map[string]*tensor.Tensor{
			"a": tensor.Full(tensor.Float32, 1, 3),
		}, want: []string{"a/0"}},
		{name: "small leaves of two dtypes", leaves: map[string]*tensor.Tensor{
			"a": tensor.Full(tensor.Float32, 1, 3),
			"b": tensor.Full(tensor.Int64, 1, 2),
			"c": tensor.Full(tensor.Float32, 1, 1),
			"d": tensor.Full(tensor.Int64, 1, 1),
			"e": tensor.Full(tensor.Float32, 1, 0),
		}, want: stepsIn(tensor.Float32, tensor.Int64, []string{"a,c/24"}, []string{"b,d/24"})},
		{name: "large leaves alone", leaves: map[string]*tensor.Tensor{
			"a": tensor.Full(tensor.Float32, 1, big),
			"b": tensor.Full(tensor.Float32, 1, 2),
			"c": tensor.Full(tensor.Float32, 1, big-1),
			"d": tensor.Full(tensor.Float32, 1, 5),
		}, want: []string{"a/0", fmt.Sprintf("b,c,d/%d", 8+roundUp8(4*(big-1))+24)}},
		{name: "buckets full", leaves: full, want: []string{
			fmt.Sprintf("%s/%d", strings.Join(fullKeys[:perBucket], ","), perBucket*(BucketLeafMax-8)),
			fmt.Sprintf("k%02d,z1,z2/%d", perBucket, BucketLeafMax-8+16),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range c.leaves {
					if !yield(k) {
						return
					}
				}
			})
			leaves := make([]*tensor.Tensor, len(keys))
			for i, k := range keys {
				leaves[i] = c.leaves[k]
			}
			var got []string
			for _, s := range planSteps(leaves) {
				var ks []string
				for _, i := range s.leaves {
					ks = append(ks, keys[i])
				}
				got = append(got, fmt.Sprintf("%s/%d", strings.Join(ks, ","), s.bytes))
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// stepsIn returns the steps of two dtypes in the order planSteps takes
// the dtypes.
func stepsIn(a, b tensor.DType, as, bs []string) []string {
	for _, dt := range tensor.DTypes() {
		switch dt {
		case a:
			return append(as, bs...)
		case b:
			return append(bs, as...)
		}
	}
	return nil
}

// TestPlanStepsViews checks a bucket that holds contiguous leaves, copied
// through their bytes, beside a view that is not, copied through its
// tensor.
func TestPlanStepsViews(t *testing.T) {
	view, err := tensor.Full(tensor.Float32, 1, 4, 6).Slice(1, 0, 6, 2)
	require.NoError(t, err)
	a, c := tensor.Full(tensor.Float32, 1, 4, 5), tensor.Full(tensor.Float32, 1, 4, 5)
	steps := planSteps([]*tensor.Tensor{a, view, c})
	require.Len(t, steps, 1)
	s := steps[0]
	require.Equal(t, []int{0, 1, 2}, s.leaves, "one bucket")
	assert.Equal(t, []int{0, 80, 128}, s.offs)
	assert.NotNil(t, s.views[0])
	assert.Nil(t, s.views[1], "the view is copied through its tensor")
	assert.Equal(t, 208, s.bytes)
}

// TestFastSpan checks when leaves are reduced as one span of their
// storage, and that the layout the ranks compare tells layouts apart.
func TestFastSpan(t *testing.T) {
	narrow := func(x *tensor.Tensor, start, n int) *tensor.Tensor {
		v, err := x.Narrow(0, start, n)
		require.NoError(t, err)
		return v
	}
	st := tensor.Zeros(tensor.Float32, 16)
	other := tensor.Zeros(tensor.Float32, 16)
	wide := tensor.Zeros(tensor.Float64, 8)
	strided, err := tensor.Zeros(tensor.Float32, 4, 4).Transpose(0, 1)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		leaves []*tensor.Tensor
		ok     bool
		bytes  int
	}{
		{"one leaf", []*tensor.Tensor{st}, true, 64},
		{"tiled", []*tensor.Tensor{narrow(st, 0, 6), narrow(st, 6, 10)}, true, 64},
		{"out of order", []*tensor.Tensor{narrow(st, 8, 8), narrow(st, 0, 8)}, true, 64},
		{"consolidated padding", []*tensor.Tensor{narrow(st, 0, 3), narrow(st, 4, 12)}, true, 64},
		{"gap of 8 bytes", []*tensor.Tensor{narrow(st, 0, 3), narrow(st, 5, 11)}, false, 0},
		{"overlap", []*tensor.Tensor{narrow(st, 0, 8), narrow(st, 4, 8)}, false, 0},
		{"two storages", []*tensor.Tensor{narrow(st, 0, 8), narrow(other, 8, 8)}, false, 0},
		{"two dtypes", []*tensor.Tensor{narrow(wide, 0, 4), tensor.Zeros(tensor.Float32, 4)}, false, 0},
		{"not contiguous", []*tensor.Tensor{strided}, false, 0},
		{"empty", []*tensor.Tensor{narrow(st, 0, 0)}, false, 0},
		{"none", nil, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			span, _, ok := fastSpan(c.leaves)
			assert.Equal(t, c.ok, ok)
			assert.Len(t, span, c.bytes)
		})
	}
	_, h1, _ := fastSpan([]*tensor.Tensor{narrow(st, 0, 6), narrow(st, 6, 10)})
	_, h2, _ := fastSpan([]*tensor.Tensor{narrow(other, 0, 6), narrow(other, 6, 10)})
	_, h3, _ := fastSpan([]*tensor.Tensor{narrow(st, 6, 10), narrow(st, 0, 6)})
	_, h4, _ := fastSpan([]*tensor.Tensor{narrow(st, 0, 4), narrow(st, 4, 12)})
	assert.Equal(t, h1, h2, "the same layout in another storage")
	assert.NotEqual(t, h1, h3, "the leaves in another order")
	assert.NotEqual(t, h1, h4, "split elsewhere")
}

// TestReductionCheck checks what a reduction refuses, named by the first
// leaf at fault: a dtype the op does not apply to, a view that repeats
// elements, a storage released after the plan was made.
func TestReductionCheck(t *testing.T) {
	x := tensor.Full(tensor.Float32, 1, 3)
	z := tensor.Full(tensor.Complex64, 1, 2)
	e, err := tensor.Full(tensor.Float32, 1, 1, 3).Expand(2, 3)
	require.NoError(t, err)
	red := PlanReduction([]*tensor.Tensor{tensor.Full(tensor.Int8, 1, 2), x, z, e}, func(i int) any { return fmt.Sprintf("k%d", i) })
	assert.ErrorContains(t, red.Check(Sum), "key k3: leaf of shape [2 3] repeats elements")
	assert.ErrorContains(t, red.Check(Max), "key k2: max does not apply to complex64")
	assert.ErrorContains(t, red.Check(Avg), "key k0: avg does not apply to int8")
	require.NoError(t, x.Storage().Release())
	assert.ErrorContains(t, red.Check(Sum), "key k1: storage was released")
	assert.NoError(t, PlanReduction([]*tensor.Tensor{z}, nil).Check(Prod))
}
