// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// remoteSeedTD builds the seed example of Python tensordict: nested keys, a
// memory-mapped leaf, expanded to batch [1 2] and made contiguous.
func remoteSeedTD(t testing.TB) *TensorDict {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("a", "b"), tensor.Ones(tensor.Float32, 2)))
	require.NoError(t, td.Set(K("c"), tensor.Ones(tensor.Float32, 2)))
	f, err := memmap.FromTensor(tensor.Ones(tensor.Float32, 2, 2), "")
	require.NoError(t, err)
	require.NoError(t, td.Set(K("d", "e", "f"), f))
	td, err = td.Expand(1, 2)
	require.NoError(t, err)
	return td.Contiguous()
}

// ctx returns a context that bounds a receive in a test.
func testCtx(t *testing.T) CommOption { return WithContext(mpitest.Ctx(t, 30*time.Second)) }

func keyStrings(keys []Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}

func TestInitRemoteSeed(t *testing.T) {
	g := mpitest.Need(t, 2)
	switch g.Rank() {
	case 0:
		require.NoError(t, remoteSeedTD(t).InitRemote(1))
	case 1:
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "c", "d"}, keyStrings(got.Keys()))
		assert.True(t, got.EqScalar(1).All())
		assert.True(t, got.IsConsolidated())
		assert.Equal(t, []int{1, 2}, got.BatchSize())
		f, err := got.Get(K("d", "e", "f"))
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2, 2}, f.Shape())
		assert.False(t, memmap.Is(f), "a memory-mapped leaf arrives as an ordinary leaf")
		// Every leaf views the one storage.
		st := got.ConsolidatedStorage()
		for _, it := range got.Items(IncludeNested(), LeavesOnly()) {
			assert.Same(t, st, it.Tensor.Storage(), "key %v", it.Key)
		}
	}
}

func TestInitRemoteNonTensor(t *testing.T) {
	g := mpitest.Need(t, 2)
	switch g.Rank() {
	case 0:
		td := New(3)
		require.NoError(t, td.Set(K("a"), tensor.Ones(tensor.Float32, 3)))
		require.NoError(t, td.SetNonTensor(K("label"), "hello"))
		require.NoError(t, td.Set(K("c"), tensor.Full(tensor.Float32, 2, 3, 2)))
		require.NoError(t, td.SetNonTensor(K("n", "meta"), map[string]any{"lr": 0.5}))
		require.NoError(t, td.InitRemote(1))
	case 1:
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		v, err := got.GetNonTensor(K("label"))
		require.NoError(t, err)
		assert.Equal(t, "hello", v)
		v, err = got.GetNonTensor(K("n", "meta"))
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"lr": 0.5}, v)
		c, err := got.Get(K("c"))
		require.NoError(t, err)
		assert.True(t, c.Equal(tensor.Full(tensor.Float32, 2, 3, 2)))
	}
}

// bigTD returns a TensorDict of n float64 leaves of m elements, leaf i
// filled with base+i.
func bigTD(t testing.TB, n, m int, base float64) *TensorDict {
	t.Helper()
	td := New()
	for i := range n {
		require.NoError(t, td.Set(K("x", fmt.Sprintf("leaf%d", i)), tensor.Full(tensor.Float64, base+float64(i), m)))
	}
	return td
}

func checkBigTD(t testing.TB, td *TensorDict, n, m int, base float64) {
	t.Helper()
	require.Len(t, td.Keys(IncludeNested(), LeavesOnly()), n)
	for i := range n {
		x, err := td.Get(K("x", fmt.Sprintf("leaf%d", i)))
		require.NoError(t, err)
		require.Equal(t, []int{m}, x.Shape())
		require.True(t, x.Equal(tensor.Full(tensor.Float64, base+float64(i), m)), "leaf%d", i)
	}
}

func TestInitRemoteSeparatePayload(t *testing.T) {
	g := mpitest.Need(t, 2)
	const n, m = 4, 1 << 17 // 4 MiB, over the inline limit
	switch g.Rank() {
	case 0:
		require.NoError(t, bigTD(t, n, m, 10).InitRemote(1))
		require.NoError(t, bigTD(t, n, m, 20).InitRemote(1))
	case 1:
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		checkBigTD(t, got, n, m, 10)
		assert.True(t, got.IsConsolidated())

		dir := t.TempDir()
		got, err = FromRemoteInit(0, testCtx(t), WithMemmap(dir))
		require.NoError(t, err)
		checkBigTD(t, got, n, m, 20)
		x, err := got.Get(K("x", "leaf0"))
		require.NoError(t, err)
		name, err := memmap.Filename(x)
		require.NoError(t, err)
		path := filepath.Join(dir, remoteMemmapFile)
		assert.Equal(t, path, name)
		// The file is tensordict's consolidated single-file format.
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		jl := int(binary.LittleEndian.Uint64(b[len(b)-8:]))
		require.Equal(t, n*m*8+jl+8, len(b))
		var meta map[string]any
		require.NoError(t, json.Unmarshal(b[n*m*8:len(b)-8], &meta))
		assert.Contains(t, meta, "x")
		st, err := FromConsolidated(tensor.StorageOf(b[:n*m*8]), b[n*m*8:len(b)-8])
		require.NoError(t, err)
		checkBigTD(t, st, n, m, 20)
	}
}

func TestInitRemoteBroadcast(t *testing.T) {
	g := ownGroup(t)
	for _, tc := range []struct {
		name string
		n, m int
		path string // bcastPath
	}{
		{"whole", 2, 3, "whole"}, // the whole frame in the first message
		{"8 KiB inline", 1, 1 << 10, "inline parts"},
		{"8 KiB inline again", 1, 1 << 10, "whole"}, // the first message as long as the last frame
		{"768 KiB apart", 3, 1 << 15, "apart"},
		{"128 KiB apart", 1, 1 << 14, "apart"},
		{"frame over the first message", 200, 512, "parts"},
		{"metadata of 2500 leaves", 2500, 1, "inline parts"},
	} {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			src := bigTD(t, tc.n, tc.m, 7)
			root := g.Size() - 1
			require.Equal(t, tc.path, bcastPath(t, g, root, src))
			if g.Rank() == root {
				require.NoError(t, src.InitRemote(-1, WithGroup(g), WithBroadcast()))
				return
			}
			got, err := FromRemoteInit(root, WithGroup(g), WithBroadcast(), testCtx(t))
			require.NoError(t, err)
			checkBigTD(t, got, tc.n, tc.m, 7)
			assert.True(t, got.IsConsolidated())
		})
	}
}

// TestInitRemoteFrameSizes sends header messages of the size of the last
// one (received in one call into MPI) and of other sizes, small and over
// the receive pool's minimum, in turn: each arrives whole.
func TestInitRemoteFrameSizes(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for i, m := range []int{4, 4, 4000, 4, 4000, 4000, 3, 4} {
		if g.Rank() == 0 {
			require.NoError(t, bigTD(t, 2, m, float64(i)).InitRemote(1))
			continue
		}
		// Without a context the guess is received in one call into MPI
		// (mpix.RecvExact); with one, the message is probed first.
		var opts []RemoteOption
		if i >= 4 {
			opts = append(opts, testCtx(t))
		}
		got, err := FromRemoteInit(0, opts...)
		require.NoError(t, err, "transfer %d", i)
		checkBigTD(t, got, 2, m, float64(i))
	}
}

// countedTD returns a consolidated TensorDict whose values tell round apart:
// "a", n float64 counting from round*1e6, and "b", "c", three int32 of round.
func countedTD(t *testing.T, n int, round float64) *TensorDict {
	t.Helper()
	a, err := tensor.Arange(tensor.Float64, round*1e6, round*1e6+float64(n), 1)
	require.NoError(t, err)
	td := New()
	require.NoError(t, td.Set(K("a"), a))
	require.NoError(t, td.Set(K("b", "c"), tensor.Full(tensor.Int32, round, 3)))
	td, err = td.Consolidate()
	require.NoError(t, err)
	return td
}

// TestInitRemoteJoined sends a consolidated TensorDict whose storage
// travels in the header message (copied after the header, or past the
// eager limit in two blocks, see storageTravel) or after it, four times each
// (the metadata first, then a kept structure), with and without a context
// on the receiver: every element arrives, and a result nobody read goes
// back to the receive pool at its release from mem.PoolMin bytes.
func TestInitRemoteJoined(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	build := countedTD
	// Float64 elements of "a": storages around each family's eager limit,
	// around splitRecvMin, up to wire.InlineMax, and past it.
	for _, n := range []int{300, 520, 760, 1020, 1100, 2040, 2500, 4000, 8180, 8200} {
		t.Run(fmt.Sprintf("%d bytes", 8*n), func(t *testing.T) {
			src := build(t, n, 0)
			for round := 1.0; round <= 4; round++ {
				if g.Rank() == 0 {
					// The same TensorDict, refilled: its first InitRemote
					// encodes it for this call, the next ones reuse the
					// encodings kept with it (sendStateInit).
					for _, it := range build(t, n, round).Items(IncludeNested(), LeavesOnly()) {
						require.NoError(t, src.SetInPlace(it.Key, it.Tensor))
					}
					require.NoError(t, src.InitRemote(1))
					continue
				}
				var opts []RemoteOption
				if round == 2 {
					opts = append(opts, testCtx(t))
				}
				got, err := FromRemoteInit(0, opts...)
				require.NoError(t, err, "round %v", round)
				if round == 4 {
					// Unread: its storage goes back to the pool at once.
					assert.Equal(t, 8*n >= mem.PoolMin, releaseGivesBack(t, got), "given back")
					continue
				}
				eq, err := got.Eq(build(t, n, round))
				require.NoError(t, err)
				assert.True(t, eq.All(), "round %v", round)
			}
		})
	}
}

// TestInitRemoteApartJoined: after two InitRemotes of a TensorDict whose
// storage the receiver takes apart from the header (recvInitFrame), a
// different TensorDict whose header message has the same size but not
// the same layout (its metadata travels with it) arrives whole all the
// same: the two parts are joined.
func TestInitRemoteApartJoined(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	a, err := tensor.Arange(tensor.Float64, 0, 4096, 1)
	require.NoError(t, err)
	x := New()
	require.NoError(t, x.Set(K("a"), a))
	x, err = x.Consolidate()
	require.NoError(t, err)
	// Described by its kept structure after the first send, x's header
	// message is a bare header and its storage; y's first one carries its
	// metadata, and a storage shorter by as much.
	n := wire.Size + x.cons.st.Len()
	y := frameOfSize(t, n)
	require.GreaterOrEqual(t, y.cons.st.Len(), splitRecvMin)
	if g.Rank() == 0 {
		for range 3 {
			require.NoError(t, x.InitRemote(1))
		}
		require.NoError(t, y.InitRemote(1))
		return
	}
	for i := range 3 {
		got, err := FromRemoteInit(0)
		require.NoError(t, err)
		eq, err := got.Eq(x)
		require.NoError(t, err)
		assert.True(t, eq.All(), "send %d of x", i)
	}
	got, err := FromRemoteInit(0)
	require.NoError(t, err)
	eq, err := got.Eq(y)
	require.NoError(t, err)
	assert.True(t, eq.All())
}

// frameOfSize returns a consolidated TensorDict of one uint8 leaf whose
// first InitRemote's header message (with its metadata) is n bytes.
func frameOfSize(t *testing.T, n int) *TensorDict {
	t.Helper()
	y := New()
	ln := n - wire.Size
	for range 10 {
		require.NoError(t, y.Set(K("y"), tensor.Full(tensor.Uint8, 7, ln)))
		p, err := planSend("InitRemote", y)
		require.NoError(t, err)
		head := wire.Size + len(p.class) + len(p.meta)
		if head+p.total == n && p.total == ln {
			c, err := y.Consolidate()
			require.NoError(t, err)
			return c
		}
		ln = n - head
	}
	t.Fatalf("no TensorDict of one uint8 leaf has a header message of %d bytes", n)
	return nil
}

// TestInitRemotePassedOn: rank 0 sends a TensorDict three times (its
// first InitRemote, then with its Send/Recv state); rank 1 passes each
// TensorDict it received back unchanged (the first encodes itself, the
// others reuse the encoding of their receive template when they have one),
// and the last one again (with its Send/Recv state): each arrives whole,
// for a storage inline, one after its header within the receive
// templates' range, the same packed for each send (not consolidated), and
// one past the templates' range.
func TestInitRemotePassedOn(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for _, tc := range []struct {
		name        string
		n, m        int
		consolidate bool
	}{
		{"inline", 3, 5, true},
		{"after the header, templated", 4, 1 << 13, true}, // 256 KiB
		{"after the header, packed", 4, 1 << 13, false},
		{"after the header, past the templates", 2, 1 << 17, true}, // 2 MiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Greater(t, templateMaxBytes, wire.InlineMax)
			td := bigTD(t, tc.n, tc.m, 3)
			if tc.consolidate {
				var err error
				td, err = td.Consolidate()
				require.NoError(t, err)
			}
			var got []*TensorDict
			for i := range 3 {
				if g.Rank() == 0 {
					require.NoError(t, td.InitRemote(1), "send %d", i)
					continue
				}
				r, err := FromRemoteInit(0, testCtx(t))
				require.NoError(t, err, "send %d", i)
				checkBigTD(t, r, tc.n, tc.m, 3)
				got = append(got, r)
			}
			for i := range 4 {
				if g.Rank() == 1 {
					require.NoError(t, got[min(i, 2)].InitRemote(0), "passing on %d", i)
					continue
				}
				again, err := FromRemoteInit(1, testCtx(t))
				require.NoError(t, err, "passing on %d", i)
				checkBigTD(t, again, tc.n, tc.m, 3)
				assert.True(t, again.IsConsolidated())
			}
		})
	}
}

// TestInitRemoteBroadcastPassedOn: a TensorDict broadcast three times by
// rank 0 (its first InitRemote, then with its Send/Recv state), then
// passed on unchanged by the last rank that received it, twice (the
// encoding of its receive template, then its state): every receiver gets
// it whole each time, small or not, consolidated or not.
func TestInitRemoteBroadcastPassedOn(t *testing.T) {
	g := mpitest.Need(t, 2)
	last := g.Size() - 1
	for _, tc := range []struct {
		m           int
		consolidate bool
	}{
		{5, false},       // inline
		{1 << 13, false}, // 192 KiB after the first message, packed each time
		{1 << 13, true},  // sent from the storage with the kept encoding
	} {
		m := tc.m
		mpitest.Run(t, fmt.Sprintf("%d elements, consolidated %v", m, tc.consolidate), func(t *testing.T) {
			td := bigTD(t, 3, m, 2)
			if tc.consolidate {
				var err error
				td, err = td.Consolidate()
				require.NoError(t, err)
			}
			var got *TensorDict
			for i := range 3 {
				if g.Rank() == 0 {
					require.NoError(t, td.InitRemote(-1, WithBroadcast()), "broadcast %d", i)
					continue
				}
				var err error
				got, err = FromRemoteInit(0, WithBroadcast(), testCtx(t))
				require.NoError(t, err, "broadcast %d", i)
				checkBigTD(t, got, 3, m, 2)
			}
			for i := range 2 {
				if g.Rank() == last {
					require.NoError(t, got.InitRemote(-1, WithBroadcast()), "passing on %d", i)
					continue
				}
				again, err := FromRemoteInit(last, WithBroadcast(), testCtx(t))
				require.NoError(t, err, "passing on %d", i)
				checkBigTD(t, again, 3, m, 2)
			}
		})
	}
}

// bcastPath tells how a broadcast of td from root on g lays out its
// frame, as the source's own code does (bcastSource, bcastFrame, with the
// first message's length of bcastFirstTable): with its storage inline,
// whole in the first message ("whole") or longer ("inline parts"); with
// its storage apart, the rest of the frame in the first message ("apart")
// or longer ("parts"), so that a test case can check it takes the path it
// names. It lays out a copy of td: a TensorDict's first broadcast takes
// another path than the later ones.
func bcastPath(t testing.TB, g *group.Group, root int, td *TensorDict) string {
	t.Helper()
	_, class, meta, st, _, err := bcastSource("InitRemote", td.Clone())
	require.NoError(t, err)
	head := wire.Size + len(class) + len(meta)
	room := coll.FirstsOf(g).Of(root) - wire.BcastPrefix
	inline := len(st) <= wire.InlineMax
	switch {
	case inline && head+len(st) <= room:
		return "whole"
	case inline:
		return "inline parts"
	case head <= room:
		return "apart"
	}
	return "parts"
}

// TestInitRemoteBroadcastRefused: a receiver refuses (over its
// WithMaxBytes), on each path of the protocol; every rank returns an
// error, the root's naming the lowest receiver that refused, and the next
// broadcast on the group works.
func TestInitRemoteBroadcastRefused(t *testing.T) {
	g := ownGroup(t)
	for _, tc := range []struct {
		name string
		n, m int // leaves, float64 elements of each
		path string
	}{
		{"frame in the first message", 1, 8, "whole"},
		{"16 KiB inline", 1, 1 << 11, "inline parts"},
		{"128 KiB apart", 1, 1 << 14, "apart"},
		{"frame over the first message", 200, 512, "parts"},
		{"metadata of 2500 leaves", 2500, 1, "inline parts"},
	} {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			src := bigTD(t, tc.n, tc.m, 1)
			require.Equal(t, tc.path, bcastPath(t, g, 0, src))
			if g.Rank() == 0 {
				err := src.InitRemote(0, WithGroup(g), WithBroadcast())
				var pe *PeerError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, 1, pe.Rank)
				assert.Contains(t, pe.Msg, "exceeds the limit")
				require.NoError(t, bigTD(t, 1, 2, 5).InitRemote(0, WithGroup(g), WithBroadcast()))
				return
			}
			_, err := FromRemoteInit(0, WithGroup(g), WithBroadcast(), WithMaxBytes(int64(tc.n*tc.m*8-1)), testCtx(t))
			require.ErrorIs(t, err, wire.ErrLimit)
			got, err := FromRemoteInit(0, WithGroup(g), WithBroadcast(), testCtx(t))
			require.NoError(t, err)
			checkBigTD(t, got, 1, 2, 5)
		})
	}
}

func TestInitRemoteSubgroup(t *testing.T) {
	g := mpitest.Need(t, 2)
	last := g.Size() - 1
	if g.Rank() != 0 && g.Rank() != last {
		return
	}
	// Subgroup rank 0 is the world's last rank, subgroup rank 1 world rank 0.
	sub, err := g.New([]int{last, 0})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sub.Free()) }()
	if sub.Rank() == 0 {
		// A world rank passed for a group rank: the error names the group.
		if last > 1 {
			err := remoteSeedTD(t).InitRemote(last, WithGroup(sub))
			assert.ErrorContains(t, err, fmt.Sprintf("rank %d is out of range [0, 2) of the group of world ranks [%d 0]", last, last))
		}
		require.NoError(t, remoteSeedTD(t).InitRemote(1, WithGroup(sub)))
		return
	}
	got, err := FromRemoteInit(0, WithGroup(sub), testCtx(t))
	require.NoError(t, err)
	assert.True(t, got.EqScalar(1).All())
}

type pointTC struct {
	X     *tensor.Tensor `td:"x"`
	Y     *tensor.Tensor `td:"y"`
	Label string         `td:"label"`
}

func init() { RegisterClass[pointTC]("tdmpi.test.Point") }

func TestInitRemoteTensorclass(t *testing.T) {
	g := mpitest.Need(t, 2)
	switch g.Rank() {
	case 0:
		td, err := FromStruct(pointTC{X: tensor.Ones(tensor.Float32, 3), Y: tensor.Full(tensor.Int64, 4, 3), Label: "p"}, WithBatchSize(3))
		require.NoError(t, err)
		require.Equal(t, "tdmpi.test.Point", td.ClassName())
		require.NoError(t, td.InitRemote(1))
	case 1:
		p, err := FromRemoteInitAs[pointTC](0, testCtx(t))
		require.NoError(t, err)
		assert.Equal(t, "p", p.Label)
		assert.True(t, p.Y.Equal(tensor.Full(tensor.Int64, 4, 3)))
		assert.True(t, p.X.Equal(tensor.Ones(tensor.Float32, 3)))
	}
}

func TestFromRemoteInitDeadline(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() != 1 {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := FromRemoteInit(0, WithContext(ctx))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), "FromRemoteInit")
	assert.Contains(t, err.Error(), "from rank 0")

	td := New()
	require.NoError(t, td.Set(K("x"), tensor.Zeros(tensor.Float32, 2)))
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	_, err = td.Recv(0, WithContext(ctx2), WithConsolidated())
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestFromRemoteInitHostileHeader(t *testing.T) {
	g := mpitest.Need(t, 2)
	switch g.Rank() {
	case 0:
		h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Total: 1 << 40, MetaLen: 2, Chunk: wire.MaxChunk, PayloadTag: proto.PayloadTag(g)}
		frame := wire.AppendFrame(nil, &h, "", []byte("{}"), nil)
		require.NoError(t, mpi.Send(proto.LibComm(g), frame, 1, xfer.InitHeaderTag))
		// A garbage message, then a good transfer: the receiver is healthy.
		require.NoError(t, mpi.Send(proto.LibComm(g), []byte("not a header at all, but long enough to be parsed as one......!!"), 1, xfer.InitHeaderTag))
		require.NoError(t, remoteSeedTD(t).InitRemote(1))
	case 1:
		_, err := FromRemoteInit(0, testCtx(t))
		require.ErrorIs(t, err, wire.ErrLimit)
		assert.Contains(t, err.Error(), "1099511627776")
		_, err = FromRemoteInit(0, testCtx(t))
		require.ErrorIs(t, err, wire.ErrHeader)
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		assert.True(t, got.EqScalar(1).All())
	}
}

func TestFromRemoteInitOverLimitDrains(t *testing.T) {
	g := mpitest.Need(t, 2)
	switch g.Rank() {
	case 0:
		require.NoError(t, bigTD(t, 2, 1<<16, 3).InitRemote(1))
		require.NoError(t, remoteSeedTD(t).InitRemote(1))
	case 1:
		_, err := FromRemoteInit(0, testCtx(t), WithMaxBytes(1<<16))
		require.ErrorIs(t, err, wire.ErrLimit)
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		assert.True(t, got.EqScalar(1).All())
	}
}

func TestInitRemoteConcurrent(t *testing.T) {
	g := mpitest.Need(t, 2)
	const workers = 4
	if g.Rank() > 1 {
		return
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker's TensorDict has its own leaf count and values, so
			// a mix-up shows.
			n, m := w+1, (1<<14)*(w+1)
			if g.Rank() == 0 {
				errs[w] = bigTD(t, n, m, float64(100*w)).InitRemote(1)
				return
			}
			got, err := FromRemoteInit(0, testCtx(t))
			if err != nil {
				errs[w] = err
				return
			}
			k := len(got.Keys(IncludeNested(), LeavesOnly()))
			x, err := got.Get(K("x", "leaf0"))
			if err != nil {
				errs[w] = err
				return
			}
			v, _ := tensor.Data[float64](x)
			sender := int(v[0]) / 100
			if k != sender+1 || x.Numel() != (1<<14)*(sender+1) {
				errs[w] = fmt.Errorf("mixed transfer: %d leaves of %d elements, first value %v", k, x.Numel(), v[0])
				return
			}
			for i := range k {
				y, _ := got.Get(K("x", fmt.Sprintf("leaf%d", i)))
				if !y.Equal(tensor.Full(tensor.Float64, float64(100*sender+i), x.Numel())) {
					errs[w] = fmt.Errorf("mixed transfer at leaf %d", i)
				}
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		assert.NoError(t, err, "worker %d", w)
	}
}

func TestInitRemoteBig(t *testing.T) {
	if os.Getenv("TDMPI_BIG") != "1" {
		t.Skip("set TDMPI_BIG=1 to send 3 GiB")
	}
	g := mpitest.Need(t, 2)
	const m = 3 << 30 / 8 / 3 // three leaves of 1 GiB
	switch g.Rank() {
	case 0:
		require.NoError(t, bigTD(t, 3, m, 1).InitRemote(1))
	case 1:
		got, err := FromRemoteInit(0, WithContext(mpitest.Ctx(t, 5*time.Minute)))
		require.NoError(t, err)
		for i := range 3 {
			x, err := got.Get(K("x", fmt.Sprintf("leaf%d", i)))
			require.NoError(t, err)
			v, err := tensor.Data[float64](x)
			require.NoError(t, err)
			require.Len(t, v, m)
			for _, j := range []int{0, m / 2, m - 1} {
				require.Equal(t, float64(1+i), v[j], "leaf%d[%d]", i, j)
			}
		}
	}
}

func TestRemoteOptionErrors(t *testing.T) {
	mpitest.Need(t, 1)
	td := New()
	err := td.InitRemote(0, WithDevice("cuda:0"))
	assert.ErrorContains(t, err, `device "cuda:0" is not supported`)
	_, err = FromRemoteInit(0, WithMaxBytes(-1))
	assert.ErrorContains(t, err, "WithMaxBytes: -1 is not positive")
	err = td.Send(0, WithTag(MaxUserTag))
	assert.ErrorContains(t, err, "WithTag")
	_, err = td.Recv(group.World().Size())
	assert.ErrorContains(t, err, "out of range")
	err = td.InitRemote(group.World().Rank())
	assert.ErrorContains(t, err, "caller itself")
	_, err = FromRemoteInit(0, WithAllocator(nil))
	assert.ErrorContains(t, err, "WithAllocator: nil allocator")
	_, err = FromRemoteInit(0, WithMemmap(t.TempDir()), WithAllocator(func(n int) (*tensor.Storage, error) { return tensor.NewStorage(n), nil }))
	assert.ErrorContains(t, err, "WithAllocator and WithMemmap cannot be combined")
}

func TestFromRemoteInitMetadataCache(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	td := New(2)
	require.NoError(t, td.Set(K("x"), tensor.Ones(tensor.Float32, 2)))
	require.NoError(t, td.SetNonTensor(K("cfg"), map[string]any{"lr": 0.5}))
	// Metadata over codec.CacheMaxBytes is not kept (internal/codec tests it).
	wide := New()
	for i := range 2000 {
		require.NoError(t, wide.Set(K("many", fmt.Sprintf("leaf%04d", i)), tensor.Ones(tensor.Uint8, 1)))
	}
	if g.Rank() == 0 {
		for range 3 {
			require.NoError(t, td.InitRemote(1))
		}
		require.NoError(t, wide.InitRemote(1))
		return
	}
	defer func() {
		r, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		meta, err := r.ConsolidatedMetadata()
		require.NoError(t, err)
		require.Greater(t, len(meta), codec.CacheMaxBytes)
	}()
	var got []*TensorDict
	for range 3 {
		r, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err)
		got = append(got, r)
	}
	// Each result has its own storage and its own non-tensor values.
	v, err := got[0].GetNonTensor(K("cfg"))
	require.NoError(t, err)
	v.(map[string]any)["lr"] = 9.0
	require.NoError(t, got[1].SetInPlace(K("x"), tensor.Full(tensor.Float32, 3, 2)))
	v2, err := got[2].GetNonTensor(K("cfg"))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"lr": 0.5}, v2)
	for _, i := range []int{0, 2} {
		x, err := got[i].Get(K("x"))
		require.NoError(t, err)
		assert.True(t, x.Equal(tensor.Ones(tensor.Float32, 2)), "result %d shares storage", i)
	}
}
