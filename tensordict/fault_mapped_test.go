// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// truncatedLoad saves a TensorDict of two leaves of n float64 (value v)
// with Memmap, loads it back with LoadMemmap, and truncates every leaf's
// file to nothing, as another process could: the mapping's pages are lost.
func truncatedLoad(t *testing.T, n int, v float64) *TensorDict {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "saved")
	_, err := bigTD(t, 2, n, v).Memmap(dir)
	require.NoError(t, err)
	loaded, err := LoadMemmap(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = loaded.Release() })
	for _, it := range loaded.Items(IncludeNested(), LeavesOnly()) {
		name, err := memmap.Filename(it.Tensor)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(name, 0))
	}
	return loaded
}

// truncatedConsolidated saves a TensorDict as SaveConsolidated does, loads
// it with LoadConsolidated, and truncates the file to nothing.
func truncatedConsolidated(t *testing.T, n int, v float64) *TensorDict {
	t.Helper()
	file := filepath.Join(t.TempDir(), "td.consolidated")
	require.NoError(t, bigTD(t, 2, n, v).SaveConsolidated(file))
	c, err := LoadConsolidated(file)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Release() })
	require.NoError(t, os.Truncate(file, 0))
	return c
}

// TestTruncatedMappingNoErrorOps is issue 12 item 13: the operations that
// return no error (Clone, EqScalar, the scalar algebra, To) on a
// TensorDict whose files were truncated panic with an error wrapping
// memmap.ErrFault and naming the operation, which memmap.Guard returns;
// before, they ended the process with SIGBUS.
func TestTruncatedMappingNoErrorOps(t *testing.T) {
	loaded := truncatedLoad(t, 1<<14, 1)
	tests := []struct {
		op string
		f  func(*TensorDict) *TensorDict
	}{
		{"Clone", (*TensorDict).Clone},
		{"EqScalar", func(td *TensorDict) *TensorDict { return td.EqScalar(1) }},
		{"NeScalar", func(td *TensorDict) *TensorDict { return td.NeScalar(1) }},
		{"MulScalar", func(td *TensorDict) *TensorDict { return td.MulScalar(2) }},
		{"To", func(td *TensorDict) *TensorDict { return td.To(tensor.Float32) }},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			err := memmap.Guard(func() error {
				tt.f(loaded)
				return nil
			})
			require.ErrorIs(t, err, memmap.ErrFault)
			assert.Contains(t, err.Error(), "tensordict: "+tt.op+": fault at address")

			// Without Guard, it is an ordinary panic the caller can recover.
			func() {
				defer func() {
					e, ok := recover().(error)
					require.True(t, ok, "panics with an error")
					assert.ErrorIs(t, e, memmap.ErrFault)
				}()
				tt.f(loaded)
			}()
		})
	}
	// A TensorDict that is not mapped is untouched by the guard.
	assert.True(t, bigTD(t, 1, 4, 1).Clone().EqScalar(1).All())
}

// TestSendTruncatedMapping is issue 12 item 13: MPI reads the memory of a
// send in C, where a fault cannot be caught, so a send of a TensorDict
// whose files were truncated fails before it sends anything, with an error
// wrapping memmap.ErrFault (per-leaf and consolidated Send, ISend,
// InitRemote; LoadMemmap and LoadConsolidated results). The receiver's
// next receive on the same tags takes the transfer sent after them. Every
// rank sends to the next one in a ring.
func TestSendTruncatedMapping(t *testing.T) {
	g := mpitest.Need(t, 2)
	prev, next := ring(g.Rank(), g.Size())
	const n = 1 << 16 // 512 KiB a leaf: InitRemote sends the storage apart
	loaded := truncatedLoad(t, n, 1)
	cons := truncatedConsolidated(t, n, 1)
	sends := []struct {
		name string
		send func() error
	}{
		{"Send per leaf", func() error { return loaded.Send(next) }},
		{"Send consolidated", func() error { return loaded.Send(next, WithConsolidated()) }},
		{"ISend", func() error {
			_, err := loaded.ISend(next)
			return err
		}},
		{"InitRemote", func() error { return loaded.InitRemote(next) }},
		{"LoadConsolidated InitRemote", func() error { return cons.InitRemote(next) }},
		{"LoadConsolidated Send consolidated", func() error { return cons.Send(next, WithConsolidated()) }},
		{"LoadConsolidated Send per leaf", func() error { return cons.Send(next) }},
	}
	for _, s := range sends {
		err := s.send()
		require.ErrorIs(t, err, memmap.ErrFault, s.name)
	}
	// Nothing was sent: the first transfers received are these.
	fresh := bigTD(t, 2, n, 9)
	sent := make(chan error, 2)
	go func() {
		sent <- fresh.Send(next, testCtx(t))
		sent <- fresh.InitRemote(next, testCtx(t))
	}()
	got := bigTD(t, 2, n, 0)
	_, err := got.Recv(prev, testCtx(t))
	require.NoError(t, err)
	checkBigTD(t, got, 2, n, 9)
	got, err = FromRemoteInit(prev, testCtx(t))
	require.NoError(t, err)
	checkBigTD(t, got, 2, n, 9)
	require.NoError(t, <-sent)
	require.NoError(t, <-sent)
}

// TestRecvIntoTruncatedMapping is issue 12 item 13: MPI writes a receive
// in C, so a Recv into a TensorDict whose files were truncated returns an
// error wrapping memmap.ErrFault instead of ending the process, and
// consumes the transfer (the sender does not hang); the next transfer is
// received intact.
func TestRecvIntoTruncatedMapping(t *testing.T) {
	g := mpitest.Need(t, 2)
	prev, next := ring(g.Rank(), g.Size())
	const n = 1 << 16
	for _, consolidated := range []bool{false, true} {
		loaded := truncatedLoad(t, n, 1)
		opts, sopts := []RecvOption{}, []SendOption{}
		if consolidated {
			opts, sopts = append(opts, WithConsolidated()), append(sopts, WithConsolidated())
		}
		sent := make(chan error, 2)
		go func() {
			sent <- bigTD(t, 2, n, 3).Send(next, append(sopts, testCtx(t))...)
			sent <- bigTD(t, 2, n, 4).Send(next, append(sopts, testCtx(t))...)
		}()
		_, err := loaded.Recv(prev, append(opts, testCtx(t))...)
		require.ErrorIs(t, err, memmap.ErrFault)
		got := bigTD(t, 2, n, 0)
		_, err = got.Recv(prev, append(opts, testCtx(t))...)
		require.NoError(t, err)
		checkBigTD(t, got, 2, n, 4)
		require.NoError(t, <-sent)
		require.NoError(t, <-sent)
	}
}

// TestCollectiveTruncatedMapping is issue 12 item 13 for the collectives:
// MPI reduces and broadcasts mapped memory in C, so an AllReduce over
// leaves whose files were truncated, and a Broadcast or broadcast-mode
// InitRemote of them, fail on every rank (ErrFault on the rank that holds
// them) instead of ending the process, and the group still works.
func TestCollectiveTruncatedMapping(t *testing.T) {
	g := mpitest.Need(t, 2)
	r := g.Rank()
	const n = 1 << 16
	loaded := truncatedLoad(t, n, 1)
	err := loaded.AllReduce(ReduceSum)
	require.ErrorIs(t, err, memmap.ErrFault, "AllReduce")

	cons := truncatedConsolidated(t, n, 1)
	var src *TensorDict
	if r == 0 {
		src = cons
	}
	_, err = src.Broadcast(0)
	require.Error(t, err, "Broadcast")
	if r == 0 {
		require.ErrorIs(t, err, memmap.ErrFault, "Broadcast on the source")
		err = loaded.InitRemote(0, WithBroadcast())
		require.ErrorIs(t, err, memmap.ErrFault, "InitRemote WithBroadcast on the source")
	} else {
		_, err = FromRemoteInit(0, WithBroadcast())
		require.Error(t, err, "FromRemoteInit WithBroadcast")
	}
	td := bigTD(t, 2, 8, float64(r))
	require.NoError(t, td.AllReduce(ReduceSum), "the group still works")
}
