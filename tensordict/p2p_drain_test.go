// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// drainModes are the two transfer modes of Send and Recv.
var drainModes = []struct {
	name string
	opts []any
}{
	{"per leaf", nil},
	{"consolidated", []any{WithConsolidated()}},
}

// TestIRecvReleasedDrains: an IRecv into a TensorDict released before its
// transfer arrives returns an error wrapping tensor.ErrReleased from Wait
// and consumes the transfer, as Recv does: the sender's blocking Send of a
// transfer too large for MPI to buffer returns, and the next transfer on
// the same tag arrives intact, not the stale one.
func TestIRecvReleasedDrains(t *testing.T) {
	g := mpitest.Need(t, 2)
	const tag = 931
	for _, m := range drainModes {
		mpitest.Run(t, m.name, func(t *testing.T) {
			if g.Rank() > 1 {
				require.NoError(t, g.Barrier()) // the world's barrier below
				return
			}
			opts := append([]any{WithTag(tag)}, m.opts...)
			if g.Rank() == 0 {
				require.NoError(t, g.Barrier()) // the receiver has released its TensorDict
				td := bigTD(t, 2, 1<<18, 6)     // 2 MiB leaves, beyond any eager limit
				sctx := WithContext(mpitest.Ctx(t, 20*time.Second))
				require.NoError(t, td.Send(1, mpitest.As[SendOption](append(opts, sctx))...), "the Send into the released IRecv")
				require.NoError(t, bigTD(t, 2, 1<<18, 7).Send(1, mpitest.As[SendOption](append(opts, sctx))...))
				return
			}
			// A consolidated TensorDict, whose storage Release releases
			// (heap storages are left to the collector).
			td, err := bigTD(t, 2, 1<<18, 0).Consolidate()
			require.NoError(t, err)
			p, err := td.IRecv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
			require.NoError(t, err)
			require.NoError(t, td.Release())
			require.NoError(t, g.Barrier())
			err = p.Wait()
			require.ErrorIs(t, err, tensor.ErrReleased)
			next := bigTD(t, 2, 1<<18, 0)
			_, err = next.Recv(0, mpitest.As[RecvOption](append(opts, testCtx(t)))...)
			require.NoError(t, err)
			checkBigTD(t, next, 2, 1<<18, 7)
			noTransferState(t)
		})
	}
}
