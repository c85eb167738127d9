// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/mpi"
)

func TestMain(m *testing.M) { mpitest.Main(m) }

// stepContexts are the two kinds of step: without a context (waits within
// one call, ended by a rank leaving) and with one (nonblocking requests).
var stepContexts = []struct {
	name string
	ctx  func(t *testing.T) context.Context
}{
	{"no context", func(*testing.T) context.Context { return context.Background() }},
	{"context", func(t *testing.T) context.Context { return mpitest.Ctx(t, 30*time.Second) }},
}

// TestCombine combines values that differ on every rank with MIN and MAX,
// with and without a context, several times in a row: every rank gets the
// combination of all, whatever the number of ranks (a power of two or
// not).
func TestCombine(t *testing.T) {
	g := mpitest.Need(t, 1)
	me, n := g.Rank(), g.Size()
	for _, tc := range stepContexts {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			for round := range 3 {
				s := NewStep(tc.ctx(t), g)
				// Rank r contributes 10+(r+round)%n and -r: the minimum
				// and maximum come from different ranks each round.
				v := []int64{int64(10 + (me+round)%n), int64(-me)}
				require.NoError(t, Combine(s, v, mpi.OpMin))
				assert.Equal(t, []int64{10, int64(1 - n)}, v, "round %d: MIN", round)
				w := []uint8{uint8((me + round) % n), uint8(me)}
				require.NoError(t, Combine(s, w, mpi.OpMax))
				assert.Equal(t, []uint8{uint8(n - 1), uint8(n - 1)}, w, "round %d: MAX", round)
			}
		})
	}
}

// TestFold sums one value per rank with Fold, with and without a
// context: every rank gets the sum of all, whatever the number of ranks,
// and every combination takes the lower rank's buffer first (each buffer
// records the lowest rank it holds, which must be below the other's).
func TestFold(t *testing.T) {
	g := mpitest.Need(t, 1)
	me, n := g.Rank(), g.Size()
	for _, tc := range stepContexts {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			for round := range 3 {
				buf, spare := make([]byte, 16), make([]byte, 16)
				binary.LittleEndian.PutUint64(buf, uint64(me+round))
				binary.LittleEndian.PutUint64(buf[8:], uint64(me))
				misordered := false
				res, err := Fold(NewStep(tc.ctx(t), g), buf, spare, func(lo, hi []byte) {
					e := binary.LittleEndian
					l, h := e.Uint64(lo[8:]), e.Uint64(hi[8:])
					misordered = misordered || l >= h
					e.PutUint64(hi, e.Uint64(lo)+e.Uint64(hi))
					e.PutUint64(hi[8:], min(l, h))
				})
				require.NoError(t, err)
				assert.Equal(t, uint64(n*(n-1)/2+n*round), binary.LittleEndian.Uint64(res), "round %d", round)
				assert.Zero(t, binary.LittleEndian.Uint64(res[8:]), "round %d: the lowest rank", round)
				assert.False(t, misordered, "round %d: a higher rank's buffer came first", round)
			}
		})
	}
	_, err := Fold(NewStep(context.Background(), g), make([]byte, mpix.CopySendMax+1), make([]byte, mpix.CopySendMax+1), func(lo, hi []byte) {})
	assert.Error(t, err, "a buffer too large to send eagerly")
}

// TestCombineOutOfStep: ranks that combine values of different lengths are
// not in the same step; the agreement fails on a rank that gets a message
// of the wrong size, and that rank's group is broken. A rank whose wait
// ends with its context returns too.
func TestCombineOutOfStep(t *testing.T) {
	world := mpitest.Need(t, 2)
	if world.Rank() > 1 {
		return
	}
	sub, err := world.New([]int{0, 1})
	require.NoError(t, err)
	defer sub.Free()
	ctx := mpitest.Ctx(t, 2*time.Second)
	s := NewStep(ctx, sub)
	v := []int32{int32(sub.Rank()), 0}
	if sub.Rank() == 1 {
		v = v[:1] // rank 0 waits for two values, gets one
	}
	err = Combine(s, v, mpi.OpMin)
	if sub.Rank() == 0 {
		require.ErrorIs(t, err, ErrOutOfStep)
		assert.ErrorIs(t, err, group.ErrBroken)
	} else {
		// Rank 1 got rank 0's two values into room for one: MPI's
		// truncation, a failed step.
		require.Error(t, err)
		assert.ErrorIs(t, err, group.ErrBroken)
	}
}

func TestCombineArgs(t *testing.T) {
	g := mpitest.Need(t, 1)
	s := NewStep(context.Background(), g)
	assert.Error(t, Combine(s, []int32{1}, mpi.OpSum), "SUM")
	s.Deferred = new(Deferred)
	assert.Error(t, Combine(s, []int32{1}, mpi.OpMin), "deferred")
}

// TestAgreeRoot: every rank learns the lowest and the highest root passed
// and the highest rank that cannot take part, the same on every rank,
// whatever the roots (negative or out of range ones included).
func TestAgreeRoot(t *testing.T) {
	g := mpitest.Need(t, 1)
	me, n := g.Rank(), g.Size()
	for _, tc := range []struct {
		name           string
		root           func(r int) int
		failed         func(r int) bool
		lo, hi, failOn int
	}{
		{"same root", func(int) int { return 0 }, func(int) bool { return false }, 0, 0, -1},
		{"each its own", func(r int) int { return r }, func(int) bool { return false }, 0, n - 1, -1},
		{"out of range", func(r int) int { return r - 1 }, func(int) bool { return false }, -1, n - 2, -1},
		{"failed", func(int) int { return n }, func(r int) bool { return r < n-1 || n == 1 }, n, n, max(n-2, 0)},
	} {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			s := NewStep(mpitest.Ctx(t, 30*time.Second), g)
			lo, hi, fail, err := s.AgreeRoot(tc.root(me), tc.failed(me))
			require.NoError(t, err)
			assert.Equal(t, []int{tc.lo, tc.hi, tc.failOn}, []int{lo, hi, fail})
		})
	}
}
