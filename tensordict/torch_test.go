// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/torchwire"
	"github.com/tdmpi/tdmpi/internal/torchwire/wirefixture"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

func torchCases(t *testing.T) []*wirefixture.Case {
	t.Helper()
	cases, err := wirefixture.Load()
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	return cases
}

// checkAgainst compares a received TensorDict with the one the case sent.
func checkAgainst(t *testing.T, want *wirefixture.TensorDict, got *TensorDict) {
	t.Helper()
	assert.Equal(t, want.BatchSize, got.BatchSize())
	assert.Equal(t, want.Locked, got.IsLocked())
	if want.Class != "TensorDict" {
		assert.Equal(t, want.Class, got.ClassName())
	}
	assert.True(t, got.IsConsolidated())
	var leaves int
	for _, it := range got.Items(IncludeNested(), LeavesOnly()) {
		if it.Tensor != nil {
			leaves++
		}
	}
	assert.Equal(t, len(want.Leaves), leaves)
	for _, wl := range want.Leaves {
		tt, err := got.Get(K(wl.Key...))
		if !assert.NoError(t, err, "leaf %v", wl.Key) {
			continue
		}
		assert.Equal(t, wl.DType, tt.DType().String(), "leaf %v", wl.Key)
		assert.Equal(t, wl.Shape, tt.Shape(), "leaf %v", wl.Key)
		b, err := tt.Bytes()
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		assert.Equal(t, wl.SHA256, hex.EncodeToString(sum[:]), "leaf %v bytes", wl.Key)
	}
	for _, nt := range want.NonTensors {
		v, err := got.GetNonTensor(K(nt.Key...))
		if assert.NoError(t, err, "non-tensor %v", nt.Key) {
			assert.Equal(t, nt.Value, v, "non-tensor %v", nt.Key)
		}
	}
	for _, n := range want.Nodes {
		sub, err := got.GetTD(K(n.Key...))
		if assert.NoError(t, err, "node %v", n.Key) {
			assert.Equal(t, n.BatchSize, sub.BatchSize(), "node %v", n.Key)
			assert.Equal(t, n.Locked, sub.IsLocked(), "node %v", n.Key)
		}
	}
}

func plainMeta(t *testing.T, p []byte) any {
	t.Helper()
	v, err := wirefixture.PlainMeta(p)
	require.NoError(t, err)
	return v
}

// Every recorded transcript, replayed by rank 0 as Python sent it, is
// received by rank 1 (point to point) or every other rank (broadcast) with
// WithTorch; then the receiver sends the TensorDict back with WithTorch,
// and rank 0, receiving as Python does, checks each message against what
// Python sent: the length, a pickle that decodes to the same metadata
// (names aside), and the same storage bytes.
func TestTorchReplay(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, c := range torchCases(t) {
		for _, mode := range []string{"p2p", "bcast"} {
			bcast := mode == "bcast"
			mpitest.Run(t, c.Name+"/"+mode, func(t *testing.T) {
				md := c.Modes[mode]
				opts := []RemoteOption{WithTorch(), testCtx(t)}
				if bcast {
					opts = append(opts, WithBroadcast())
				}
				switch {
				case g.Rank() == 0:
					require.NoError(t, wirefixture.SendAsTorch(md, bcast, 1))
					back, err := wirefixture.RecvAsTorch(1, bcast)
					require.NoError(t, err)
					assert.Equal(t, binary.LittleEndian.AppendUint64(nil, uint64(len(back[1]))), back[0], "message 0")
					assert.Equal(t, plainMeta(t, md.Payload[1]), plainMeta(t, back[1]), "message 1")
					assert.Equal(t, md.Payload[2], back[2], "message 2")
				case g.Rank() == 1 || bcast:
					got, err := FromRemoteInit(0, opts...)
					require.NoError(t, err)
					checkAgainst(t, &c.TD, got)
					if !bcast {
						require.NoError(t, got.InitRemote(0, opts...))
						return
					}
					if g.Rank() == 1 {
						require.NoError(t, got.InitRemote(0, opts...))
						return
					}
					again, err := FromRemoteInit(1, opts...)
					require.NoError(t, err)
					checkAgainst(t, &c.TD, again)
				}
			})
		}
	}
}

// A receive that no sender answers ends with the context; a peer that
// announces one size and sends another, or sends a pickle that names a
// global, gets an error, not a hang.
func TestTorchRefuses(t *testing.T) {
	g := mpitest.Need(t, 2)
	w := mpi.World()
	mpitest.Run(t, "context", func(t *testing.T) {
		if g.Rank() != 1 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := FromRemoteInit(0, WithTorch(), WithContext(ctx))
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 20*time.Second)
	})
	// Each refused transfer is followed by a good one, which arrives
	// intact: the refused one was drained, to its last message.
	var seed *wirefixture.Case
	for _, c := range torchCases(t) {
		if c.Name == "seed" {
			seed = c
		}
	}
	require.NotNil(t, seed)
	refused := func(name string, msgs [3][]byte, check func(t *testing.T, err error)) {
		mpitest.Run(t, name, func(t *testing.T) {
			switch g.Rank() {
			case 0:
				n := []int64{int64(binary.LittleEndian.Uint64(msgs[0]))}
				require.NoError(t, mpi.Send(w, n, 1, 0))
				require.NoError(t, mpi.Send(w, msgs[1], 1, 0))
				require.NoError(t, mpi.Send(w, msgs[2], 1, 0))
				require.NoError(t, wirefixture.SendAsTorch(seed.Modes["p2p"], false, 1))
			case 1:
				_, err := FromRemoteInit(0, WithTorch(), testCtx(t))
				require.Error(t, err)
				check(t, err)
				got, err := FromRemoteInit(0, WithTorch(), testCtx(t))
				require.NoError(t, err)
				checkAgainst(t, &seed.TD, got)
			}
		})
	}
	le := func(n int) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }
	refused("wrong length", [3][]byte{le(10), make([]byte, 12), make([]byte, 32)}, func(t *testing.T, err error) {
		assert.Contains(t, err.Error(), "the metadata pickle is a message of 12 bytes, want 10")
	})
	global := []byte("\x80\x04cos\nsystem\n.")
	refused("global", [3][]byte{le(len(global)), global, make([]byte, 8)}, func(t *testing.T, err error) {
		assert.ErrorIs(t, err, torchwire.ErrOpcode)
		assert.Contains(t, err.Error(), "GLOBAL")
	})
	refused("huge pickle", [3][]byte{le(1 << 40), {1}, {2}}, func(t *testing.T, err error) {
		assert.ErrorIs(t, err, torchwire.ErrLimit)
	})
	short := seed.Modes["p2p"].Payload // an array: a copy
	short[2] = short[2][:24]
	refused("short storage", short, func(t *testing.T, err error) {
		assert.Contains(t, err.Error(), "the storage is a message of 24 bytes, want 32")
	})
	mpitest.Run(t, "subgroup", func(t *testing.T) {
		if g.Rank() > 1 {
			return
		}
		sub, err := g.New([]int{0, 1})
		require.NoError(t, err)
		defer func() { require.NoError(t, sub.Free()) }()
		_, err = FromRemoteInit(1-g.Rank(), WithTorch(), WithGroup(sub))
		assert.ErrorContains(t, err, "torch's ranks talk on the world")
	})
}

// A complex128 leaf that 8-byte padding would put at 8 mod 16 is either
// laid out 16-aligned or refused before anything is sent, naming the key.
func TestTorchComplex128Alignment(t *testing.T) {
	td := New(1)
	require.NoError(t, td.Set(K("x"), tensor.Ones(tensor.Float64, 1)))
	require.NoError(t, td.Set(K("n", "z"), tensor.Ones(tensor.Complex128, 1)))
	pickle, storage, err := torchPrepare(td, false)
	if err != nil {
		assert.ErrorIs(t, err, torchwire.ErrMetadata)
		assert.ErrorContains(t, err, `key ("n", "z"): complex128 leaf starts at byte 8`)
		return
	}
	m, err := torchwire.ParseMeta(pickle, false, torchwire.Limits{})
	require.NoError(t, err)
	leaf := m.Root.Children[0].Node.Leaves[0]
	assert.Zero(t, leaf.Start%16)
	assert.EqualValues(t, len(storage), m.TotalBytes)
}
