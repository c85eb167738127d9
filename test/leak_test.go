// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// TestTensorDictsAreCollected checks that a TensorDict used once in a
// transfer and then dropped is garbage collected with its storage, on
// both sides, for each operation: the soak's memory check found the heap
// growing by the payloads of every Send and Recv.
//
// This found the per-TensorDict state of Send, Recv, ISend and IRecv (and
// of InitRemote senders) kept in a global map whose values held the
// TensorDict strongly (tensordict/p2p_state.go, p2pStateOf); the state
// now lives in the TensorDict itself.
func TestTensorDictsAreCollected(t *testing.T) {
	world := mpitest.Need(t, 2)
	const rounds = 64
	const leafBytes = 256 << 10
	ops := []struct {
		name string
		run  func(td *tensordict.TensorDict, peer int, sender bool) error
	}{
		{"InitRemote", func(td *tensordict.TensorDict, peer int, sender bool) error {
			if sender {
				return td.InitRemote(peer)
			}
			_, err := tensordict.FromRemoteInit(peer)
			return err
		}},
		{"Send/Recv consolidated", func(td *tensordict.TensorDict, peer int, sender bool) error {
			if sender {
				return td.Send(peer, tensordict.WithConsolidated())
			}
			_, err := td.Recv(peer, tensordict.WithConsolidated())
			return err
		}},
		{"Send/Recv per leaf", func(td *tensordict.TensorDict, peer int, sender bool) error {
			if sender {
				return td.Send(peer)
			}
			_, err := td.Recv(peer)
			return err
		}},
		{"ISend/IRecv", func(td *tensordict.TensorDict, peer int, sender bool) error {
			var p *tensordict.Pending
			var err error
			if sender {
				p, err = td.ISend(peer)
			} else {
				p, err = td.IRecv(peer)
			}
			if err != nil {
				return err
			}
			return p.Wait()
		}},
	}
	for _, op := range ops {
		mpitest.Run(t, op.name, func(t *testing.T) {
			me := world.Rank()
			if me > 1 {
				return
			}
			var collected atomic.Int64
			for range rounds {
				td := tensordict.New()
				require.NoError(t, td.Set(tensordict.K("x"), tensor.Ones(tensor.Uint8, leafBytes)))
				runtime.AddCleanup(td, func(*atomic.Int64) { collected.Add(1) }, &collected)
				require.NoError(t, op.run(td, 1-me, me == 0))
			}
			deadline := time.Now().Add(hangLimit) // polled: a pass ends at once
			for collected.Load() < rounds*9/10 && time.Now().Before(deadline) {
				runtime.GC()
				time.Sleep(10 * time.Millisecond)
			}
			side := "receiver"
			if me == 0 {
				side = "sender"
			}
			assert.GreaterOrEqual(t, collected.Load(), int64(rounds*9/10),
				"%s: %d of %d TensorDicts (%d KiB each) were garbage collected after %s", side, collected.Load(), rounds, leafBytes>>10, op.name)
		})
	}
}
