// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
)

// Releasing a receive-pool storage gives its region back to the pool at
// once only when no slice of it can be held anywhere: not after Bytes (or
// an accessor built on it) handed its memory out, not while a transfer
// holds it; rawbytes.Of reads it without counting. Views of a
// released storage see it released either way.
func TestReleaseGivesBackUnseen(t *testing.T) {
	const n = 64 << 10
	tests := []struct {
		name  string
		use   func(st *Storage)
		given bool
	}{
		{"untouched", func(*Storage) {}, true},
		{"read by a transfer", func(st *Storage) {
			b, ok := rawbytes.Of(st)
			require.True(t, ok)
			b[0] = 1
		}, true},
		{"viewed by tensors", func(st *Storage) {
			_, err := FromStorage(Float64, st, 0, n/8)
			require.NoError(t, err)
		}, true},
		{"Bytes", func(st *Storage) { _ = st.Bytes() }, false},
		{"Tensor.Bytes", func(st *Storage) {
			x, err := FromStorage(Uint8, st, 0, n)
			require.NoError(t, err)
			_, err = x.Bytes()
			require.NoError(t, err)
		}, false},
		{"Data", func(st *Storage) {
			x, err := FromStorage(Float64, st, 0, n/8)
			require.NoError(t, err)
			_, err = Data[float64](x)
			require.NoError(t, err)
		}, false},
		{"held", func(st *Storage) { require.True(t, rawbytes.Hold(st)) }, false},
		{"held, then unheld", func(st *Storage) { require.True(t, rawbytes.Hold(st)); rawbytes.Unhold(st) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := mem.Recv(n)
			require.NoError(t, err)
			st := reusableStorageOf(b)
			tt.use(st)
			x, err := FromStorage(Uint8, st, 0, 8)
			require.NoError(t, err)
			before := mem.Stats().GivenBack
			require.NoError(t, st.Release())
			assert.Equal(t, tt.given, mem.Stats().GivenBack == before+1, "given back")
			_, err = x.Bytes()
			assert.ErrorIs(t, err, ErrReleased)
			_, ok := rawbytes.Of(st)
			assert.False(t, ok, "rawbytes.Of of a released storage")
		})
	}
}

// A storage that a transfer holds (rawbytes.Hold) is released at once for
// its users, but its memory is freed only when the last hold ends: the
// release function of an external storage runs then, once, and a
// receive-pool region goes back to the pool then. A released storage
// refuses new holds.
func TestReleaseWhileHeld(t *testing.T) {
	t.Run("external", func(t *testing.T) {
		freed := 0
		st := NewExternalStorage(make([]byte, 64), nil, func() error { freed++; return nil })
		require.True(t, rawbytes.Hold(st))
		require.True(t, rawbytes.Hold(st))
		require.NoError(t, st.Release(), "Release while held reports success")
		assert.True(t, st.Released())
		_, ok := rawbytes.Of(st)
		assert.False(t, ok, "a released storage is unusable at once")
		assert.False(t, rawbytes.Hold(st), "a released storage refuses new holds")
		rawbytes.Unhold(st)
		assert.Zero(t, freed, "freed while a hold remains")
		rawbytes.Unhold(st)
		assert.Equal(t, 1, freed, "freed when the last hold ends")
		require.NoError(t, st.Release())
		assert.Equal(t, 1, freed, "freed once")
	})
	t.Run("receive pool", func(t *testing.T) {
		b, err := mem.Recv(64 << 10)
		require.NoError(t, err)
		st := reusableStorageOf(b)
		require.True(t, rawbytes.Hold(st))
		before := mem.Stats().GivenBack
		require.NoError(t, st.Release())
		assert.Equal(t, before, mem.Stats().GivenBack, "given back while held")
		rawbytes.Unhold(st)
		assert.Equal(t, before+1, mem.Stats().GivenBack, "given back when the hold ends")
	})
	t.Run("off-heap", func(t *testing.T) {
		st, err := NewOffHeapStorage(1 << 20)
		require.NoError(t, err)
		b, ok := rawbytes.Of(st)
		require.True(t, ok)
		require.True(t, rawbytes.Hold(st))
		require.NoError(t, st.Release())
		b[len(b)-1] = 1 // still mapped: a fault here ends the test binary
		assert.Equal(t, byte(1), b[len(b)-1])
		rawbytes.Unhold(st)
	})
}
