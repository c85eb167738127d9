// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIntGeneratorDocVector(t *testing.T) {
	// The chain of tensordict's int_generator docstring.
	want := []int{6756, 1717, 4410, 9740, 9611, 9716, 5397, 7745, 4521, 7523}
	x := 10
	for i, w := range want {
		x = IntGenerator(x)
		assert.Equal(t, w, x, "step %d", i)
	}
}

func TestLeafTags(t *testing.T) {
	assert.Equal(t, []int{5, 6, 7}, LeafTags(nil, 3, 5, false))
	got := LeafTags(nil, 3, 0, true)
	assert.Equal(t, []int{IntGenerator(0), IntGenerator(IntGenerator(0) + 1), IntGenerator(IntGenerator(IntGenerator(0)+1) + 1)}, got)
	for _, tag := range got {
		assert.True(t, tag >= 0 && tag < 10000)
	}
	assert.Panics(t, func() { IntGenerator(-1) })
}
