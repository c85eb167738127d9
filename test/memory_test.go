// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensordict"
)

// TestHostileHeaderBeyondMemory: a peer announces a storage the machine
// cannot hold (issue 12, item 12). Before the check, the receiver's heap
// allocation of it ended the process with the runtime's fatal "out of
// memory", which nothing recovers. Now:
//
//   - under the default limit, which is the machine's memory (at most
//     64 GiB), a 60 GiB storage on a smaller machine is refused by the limit;
//   - with the limit raised above it (WithMaxBytes), it is refused by the
//     memory check, an error wrapping tensordict.ErrNoMemory;
//
// and in both cases the receiver drains what the header announces and
// runs a normal transfer with the same peer afterwards.
func TestHostileHeaderBeyondMemory(t *testing.T) {
	world := mpitest.Need(t, 2)
	me := world.Rank()
	phys := mem.Physical()
	if phys <= 0 {
		t.Skip("SKIP: the machine's memory size is unknown here (no /proc/meminfo), nothing to check against")
	}
	var tag int
	if me <= 1 {
		tag, _ = learnInitTag(t, world)
	}
	good := hostileMeta("uint8", "[16]", 0, 16)
	cases := []struct {
		name  string
		total int64
		opts  []tensordict.RemoteOption
		want  []error // any of them
	}{
		{"60 GiB, default limit", 60 << 30, nil, []error{wire.ErrLimit, tensordict.ErrNoMemory}},
		{"twice the machine, limit raised", 2*phys + 1<<30, []tensordict.RemoteOption{tensordict.WithMaxBytes(1 << 50)}, []error{tensordict.ErrNoMemory}},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			if me > 1 {
				return
			}
			if me == 0 {
				h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Leaves: 1,
					Total: c.total, Chunk: wire.MaxChunk, PayloadTag: 40000}
				require.NoError(t, mpi.Send(proto.LibComm(world), frame(h, "", good, nil, nil), 1, tag))
			} else {
				ctx := mpitest.Ctx(t, hangLimit)
				start := time.Now()
				td, err := tensordict.FromRemoteInit(0, append(c.opts, tensordict.WithContext(ctx))...)
				took := time.Since(start)
				if assert.Error(t, err, "FromRemoteInit accepted %d bytes on a machine of %d: %v", c.total, phys, td) {
					t.Logf("%s (%v)", clip(err.Error()), took.Round(time.Millisecond))
					matched := false
					for _, w := range c.want {
						matched = matched || errors.Is(err, w)
					}
					assert.True(t, matched, "error %v wraps none of %v", err, c.want)
				}
				assert.Less(t, took, hangLimit)
			}
			checkHealthy(t, me)
		})
	}
}

// TestHostileBroadcastBeyondMemory: Broadcast's receivers refuse, and
// agree to refuse, a root's storage that is within their limit (here
// exactly the default limit, the machine's memory) but beyond the memory
// they have available: each returns an error wrapping ErrNoMemory, the root
// learns it from the agreement step, and the next Broadcast works.
func TestHostileBroadcastBeyondMemory(t *testing.T) {
	world := mpitest.Need(t, 2)
	me := world.Rank()
	if mem.Physical() <= 0 {
		t.Skip("SKIP: the machine's memory size is unknown here (no /proc/meminfo)")
	}
	c := proto.LibComm(world)
	bcastFirst := wire.BcastFirst
	bcastPrefix := wire.BcastPrefix
	total := wire.MachineMaxTotal() // the default limit: accepted by it
	mpitest.Run(t, "machine-sized storage", func(t *testing.T) {
		rootsComparedNext(t, me, world.Size())
		if me == 0 {
			h := wire.Header{Kind: wire.KindBroadcast, Flags: wire.FlagConsolidated, Leaves: 1, Total: total, Chunk: wire.MaxChunk}
			f := frame(h, "", hostileMeta("uint8", "[16]", 0, 16), nil, nil)
			b := make([]byte, bcastFirst)
			binary.LittleEndian.PutUint64(b[8:], uint64(len(f)))
			binary.LittleEndian.PutUint64(b[16:], 1) // more messages follow
			copy(b[bcastPrefix:], f)
			libAgreeRoot(t, world, 0)
			require.NoError(t, libBcast(c, b, 0))
			receiversRefused(t, world)
			endCollective(t, c)
		} else {
			ctx := mpitest.Ctx(t, hangLimit)
			start := time.Now()
			td, err := tensordict.New().Broadcast(0, tensordict.WithContext(ctx))
			took := time.Since(start)
			if assert.Error(t, err, "Broadcast accepted %d bytes: %v", total, td) {
				t.Logf("%s (%v)", clip(err.Error()), took.Round(time.Millisecond))
				if me == 1 {
					assert.ErrorIs(t, err, tensordict.ErrNoMemory)
				}
			}
			assert.Less(t, took, hangLimit)
		}
		broadcastStillWorks(t, me, "the Broadcast after the refused one")
	})
}
