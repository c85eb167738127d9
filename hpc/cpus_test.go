// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package hpc

import (
	"math/bits"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		bad  bool
	}{
		{in: "0", want: 1},
		{in: "0-1", want: 2},
		{in: "0-3,8,10-11", want: 7},
		{in: "", bad: true},
		{in: "0-", bad: true},
		{in: "3-1", bad: true},
		{in: "a", bad: true},
	} {
		got, err := parseCPUList(tc.in)
		if tc.bad {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestOnlineCPUs(t *testing.T) {
	n, err := OnlineCPUs()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, runtime.NumCPU(), "this process runs on some of the online CPUs")
}

func TestAffinityMask(t *testing.T) {
	mask, err := AffinityMask()
	require.NoError(t, err)
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	assert.Equal(t, runtime.NumCPU(), n, "CPUs in the mask")
}
