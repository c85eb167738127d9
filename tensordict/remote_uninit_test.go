// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// paddedTD returns a consolidated TensorDict of total bytes about n whose
// leaves leave padding between them (odd byte lengths), every leaf byte
// set from seed.
func paddedTD(t *testing.T, n, seed int) *TensorDict {
	t.Helper()
	td := New()
	for i, sz := range []int{n/2 + 3, 5, n/2 - 1, 1} {
		v := make([]uint8, sz)
		for j := range v {
			v[j] = uint8(seed + i + j*3)
		}
		x, err := tensor.FromSlice(v, sz)
		require.NoError(t, err)
		require.NoError(t, td.Set(K(fmt.Sprint("l", i)), x))
	}
	c, err := td.Consolidate()
	require.NoError(t, err)
	return c
}

// dirtyHeap fills and drops buffers of n bytes, so that storage allocated
// next without clearing would show 0xA5 wherever a receive failed to write.
func dirtyHeap(n int) {
	for range 4 {
		b := mem.AllocUninit(n)
		for i := range b {
			b[i] = 0xA5
		}
	}
	runtime.GC()
}

// Received storages are allocated without clearing (internal/mem): every
// byte, padding included, must come from the sender, in both modes and
// both sizes (inline and separate payload).
func TestInitRemoteStorageFullyWritten(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, n := range []int{1000, 8 << 20} {
		for _, bcast := range []bool{false, true} {
			var opts []any
			if bcast {
				opts = append(opts, WithBroadcast())
			}
			want := paddedTD(t, n, n).ConsolidatedStorage().Bytes()
			if !bcast && g.Rank() > 1 {
				continue // point to point: ranks 0 and 1 only
			}
			if g.Rank() == 0 {
				require.NoError(t, paddedTD(t, n, n).InitRemote(1, mpitest.As[RemoteOption](opts)...))
				continue
			}
			dirtyHeap(len(want))
			got, err := FromRemoteInit(0, mpitest.As[RemoteOption](append(opts, testCtx(t)))...)
			require.NoError(t, err)
			require.Equal(t, want, got.ConsolidatedStorage().Bytes(), "n=%d broadcast=%v", n, bcast)
		}
	}
}

// The same for Broadcast (the collective) into a new TensorDict.
func TestBroadcastStorageFullyWritten(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, n := range []int{1000, 8 << 20} {
		want := paddedTD(t, n, n+1).ConsolidatedStorage().Bytes()
		var td *TensorDict
		if g.Rank() == 0 {
			td = paddedTD(t, n, n+1)
		} else {
			dirtyHeap(len(want))
		}
		got, err := td.Broadcast(0)
		require.NoError(t, err)
		require.Equal(t, want, got.ConsolidatedStorage().Bytes(), "n=%d", n)
	}
}
