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
// has it pinned; rawbytes.Of reads it without counting. Views of a
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
		{"pinned", func(st *Storage) { rawbytes.Pin(st) }, false},
		{"pinned, then unpinned", func(st *Storage) { rawbytes.Pin(st); rawbytes.Unpin(st) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := mem.Recv(n)
			require.NoError(t, err)
			st := ReusableStorageOf(b)
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
