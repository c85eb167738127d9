// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tdmpi/tdmpi/internal/wire"
)

// TestFirsts follows a group's record through broadcasts from one root,
// then another: the first message follows each root's frames, and a root
// is steady after two broadcasts in a row, until it is taken.
func TestFirsts(t *testing.T) {
	f := &Firsts{first: map[int]int{}}
	assert.Equal(t, -1, f.TakeSteady())
	assert.Equal(t, wire.BcastFirst, f.Of(1))

	f.Agreed(1, wire.BcastFirst, 10000)
	assert.Equal(t, -1, f.TakeSteady(), "one broadcast from rank 1")
	next := f.Of(1)
	assert.Equal(t, wire.NextBcastFirst(wire.BcastFirst, 10000), next)
	assert.Equal(t, wire.BcastFirst, f.Of(0), "another root's first message")

	f.Agreed(1, next, 10000)
	assert.Equal(t, next, f.Of(1))
	assert.Equal(t, 1, f.TakeSteady(), "two broadcasts from rank 1")
	assert.Equal(t, -1, f.TakeSteady(), "taken")

	f.Agreed(1, next, 10000)
	f.Agreed(0, wire.BcastFirst, 100)
	assert.Equal(t, -1, f.TakeSteady(), "the root changed")
	f.Agreed(0, wire.BcastFirst, 100)
	assert.Equal(t, 0, f.TakeSteady())
}
