// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// The hostile tests make rank 0 a crafted peer: it sends raw bytes with
// mpi.Send (or mpi.Bcast) on the group's library communicator, where the
// library's protocol messages travel, while rank 1 (or every other rank)
// calls the library as usual. Each crafted message must give the receiver
// an error without hanging, and leave it able to run a normal transfer with the
// same peer right after.

// hostileMeta is the consolidated metadata of {x: dtype shape} whose bytes
// are storage[start:stop], in the JSON the library writes.
func hostileMeta(dtype, shape string, start, stop int64) []byte {
	return fmt.Appendf(nil, `{"cls":"TensorDict","non_tensors":{},"leaves":{"x":[%q,%s,%d,%d,0]},"cls_metadata":{"device":null,"names":[],"batch_size":[],"is_locked":false}}`,
		dtype, shape, start, stop)
}

// deepMeta is metadata nested depth levels deep.
func deepMeta(depth int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"device":null,"names":[],"batch_size":[],"is_locked":false},"n":`)
	b.WriteString(strings.Repeat(`{"n":`, depth))
	b.WriteString(`{}`)
	b.WriteString(strings.Repeat(`}`, depth+1))
	return b.Bytes()
}

// frame encodes a crafted frame; AppendFrame sets the section lengths, and
// edit may then change any byte.
func frame(h wire.Header, class string, meta, inline []byte, edit func(b []byte)) []byte {
	b := wire.AppendFrame(nil, &h, class, meta, inline)
	if edit != nil {
		edit(b)
	}
	return b
}

// healthyTD is what the health checks send: {x: int64[4]} of sevens.
func healthyTD(t *testing.T) *tensordict.TensorDict {
	td := tensordict.New()
	require.NoError(t, td.Set(tensordict.K("x"), tensor.Full(tensor.Int64, 7, 4)))
	return td
}

// checkHealthy runs a normal InitRemote from rank 0 to rank 1.
func checkHealthy(t *testing.T, me int) {
	t.Helper()
	ctx := mpitest.Ctx(t, hangLimit)
	td := healthyTD(t)
	if me == 0 {
		require.NoError(t, td.InitRemote(1), "the InitRemote after a hostile message")
		return
	}
	got, err := tensordict.FromRemoteInit(0, tensordict.WithContext(ctx))
	require.NoError(t, err, "the FromRemoteInit after a hostile message")
	require.NoError(t, tensordict.DiffStructure(td, got))
	assert.True(t, got.EqScalar(7).All())
}

// learnInitTag has rank 1 send a genuine InitRemote to rank 0, which takes
// it raw and returns its tag and parsed frame, so that the crafted messages
// use whatever tag the library uses for InitRemote headers. It does so on
// a subgroup of ranks 0 and 1 made for the call: rank 1 then takes the
// structure for kept at rank 0 there only (a frame asking to keep it,
// wire.FlagKeep, which rank 0 never kept), not on g.
func learnInitTag(t *testing.T, g *group.Group) (int, wire.Frame) {
	t.Helper()
	sub, err := g.New([]int{0, 1})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sub.Free()) }()
	td := tensordict.New()
	require.NoError(t, td.Set(tensordict.K("x"), tensor.Ones(tensor.Float32, 4)))
	if g.Rank() == 1 {
		require.NoError(t, td.InitRemote(0, tensordict.WithGroup(sub)))
		return 0, wire.Frame{}
	}
	m, st, err := mpi.Mprobe(proto.LibComm(sub), 1, mpi.AnyTag)
	require.NoError(t, err)
	buf := make([]byte, st.Bytes())
	_, err = mpi.Mrecv(m, buf)
	require.NoError(t, err)
	f, err := wire.ParseFrame(buf, wire.Limits{})
	require.NoError(t, err, "the genuine InitRemote frame")
	require.Equal(t, wire.KindInit, f.Kind)
	require.Equal(t, string(hostileMeta("torch.float32", "[4]", 0, 16)), strings.TrimRight(string(f.Meta), " "),
		"the crafted metadata follows the library's format")
	return st.Tag, f
}

func TestHostileInitRemote(t *testing.T) {
	world := mpitest.Need(t, 2)
	me := world.Rank()
	var tag int
	var genuine wire.Frame
	if me <= 1 {
		tag, genuine = learnInitTag(t, world)
	}
	if me == 0 {
		t.Logf("InitRemote headers travel on tag %d of the library communicator", tag)
	}
	ones := bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 4) // float32 1, 1, 1, 1
	init := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Leaves: 1}
	good := hostileMeta("torch.float32", "[4]", 0, 16)
	garbage := make([]byte, 64)
	for i := range garbage {
		garbage[i] = byte(rand.IntN(256))
	}
	garbage[0] = 'X'
	cases := []struct {
		name string
		msg  func() []byte
		want error  // errors.Is target, or nil
		text string // substring of the error, or ""
	}{
		{"1 TB payload", func() []byte {
			h := init
			h.Total, h.Chunk, h.PayloadTag = 1<<40, wire.MaxChunk, 40000
			return frame(h, "", good, nil, nil)
		}, wire.ErrLimit, "total"},
		{"1 TB inline", func() []byte {
			return frame(init, "", good, ones, func(b []byte) { binary.LittleEndian.PutUint64(b[8:], 1<<40) })
		}, wire.ErrLimit, ""},
		{"negative shape", func() []byte { return frame(init, "", hostileMeta("torch.float32", "[-4]", 0, 16), ones, nil) }, nil, "x"},
		{"shape overflow", func() []byte {
			return frame(init, "", hostileMeta("torch.float32", "[4611686018427387904,4611686018427387904]", 0, 16), ones, nil)
		}, nil, "x"},
		{"offset past the storage", func() []byte { return frame(init, "", hostileMeta("torch.float32", "[4]", 4096, 4112), ones, nil) }, nil, "x"},
		{"stop before start", func() []byte { return frame(init, "", hostileMeta("torch.float32", "[4]", 16, 0), ones, nil) }, nil, "x"},
		{"unknown dtype", func() []byte { return frame(init, "", hostileMeta("torch.float128", "[4]", 0, 16), ones, nil) }, nil, "float128"},
		{"10,000 nesting levels", func() []byte { return frame(init, "", deepMeta(10000), nil, nil) }, nil, "deep"},
		{"metadata not JSON", func() []byte { return frame(init, "", []byte("\xff\xfe{\"cls\""), ones, nil) }, nil, ""},
		{"garbage", func() []byte { return garbage }, wire.ErrHeader, "magic"},
		{"shorter than a header", func() []byte { return garbage[:10] }, wire.ErrHeader, ""},
		{"80 MiB message", func() []byte { return make([]byte, 80<<20) }, wire.ErrLimit, ""},
		{"metadata length past the message", func() []byte {
			return frame(init, "", good, ones, func(b []byte) { binary.LittleEndian.PutUint64(b[16:], uint64(len(good)+100)) })
		}, wire.ErrHeader, "length"},
		{"64 KiB class name", func() []byte {
			return frame(init, strings.Repeat("C", 64<<10), good, ones, nil)
		}, wire.ErrLimit, "class"},
		{"header of another protocol", func() []byte {
			h := init
			h.Kind = wire.KindSend
			return frame(h, "", good, ones, nil)
		}, nil, "send"},
		{"genuine header, a ref without a structure to keep", func() []byte {
			h := genuine.Header
			h.Flags &^= wire.FlagKeep
			return frame(h, "", genuine.Meta, genuine.Inline, func(b []byte) { b[60] = 1 })
		}, wire.ErrHeader, "ref"},
		{"described by a structure never kept", func() []byte {
			h := genuine.Header
			h.Flags = h.Flags&^wire.FlagKeep | wire.FlagDescribed
			h.Ref = 1 << 50
			return frame(h, "", nil, genuine.Inline, nil)
		}, wire.ErrHeader, "did not keep"},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			if me > 1 {
				return // every rank runs the subtest, for agreement
			}
			if me == 0 {
				require.NoError(t, mpi.Send(proto.LibComm(world), c.msg(), 1, tag))
			} else {
				ctx := mpitest.Ctx(t, hangLimit)
				start := time.Now()
				td, err := tensordict.FromRemoteInit(0, tensordict.WithContext(ctx))
				took := time.Since(start)
				// assert, not require: the health check below must run
				// whatever happens, or rank 0's message would stay queued
				// for a later test.
				if assert.Error(t, err, "FromRemoteInit accepted a hostile message: %v", td) {
					t.Logf("%s (%v)", clip(err.Error()), took.Round(time.Millisecond))
					assert.Contains(t, err.Error(), "tensordict: FromRemoteInit: rank 1 of")
					assert.Less(t, len(err.Error()), maxErrorText, "error text of %d bytes", len(err.Error()))
					if c.want != nil {
						assert.ErrorIs(t, err, c.want)
					}
					if c.text != "" {
						assert.Contains(t, err.Error(), c.text)
					}
				}
				assert.Less(t, took, hangLimit)
			}
			checkHealthy(t, me)
		})
	}
}

// TestHostileSend crafts the messages of Send (a 64-byte header, then the
// metadata) for a rank 1 in Recv with WithConsolidated.
func TestHostileSend(t *testing.T) {
	world := mpitest.Need(t, 2)
	me := world.Rank()
	const tag = 5 // the WithTag tag: Send's header and metadata use it
	meta := hostileMeta("torch.float32", "[4]", 0, 16)
	hdr := func(h wire.Header) []byte { return wire.Append(nil, &h) }
	send := wire.Header{Kind: wire.KindSend, Flags: wire.FlagConsolidated, Leaves: 1, MetaLen: int64(len(meta)), PayloadTag: tag}
	cases := []struct {
		name string
		msgs func() [][]byte
		want error
		text string
	}{
		{"1 TB payload", func() [][]byte {
			h := send
			h.Total, h.Chunk = 1<<40, wire.MaxChunk
			return [][]byte{hdr(h), meta}
		}, wire.ErrLimit, "total"},
		{"10-byte header", func() [][]byte { return [][]byte{make([]byte, 10)} }, nil, "10 bytes"},
		{"metadata shorter than announced", func() [][]byte {
			h := send
			h.Flags |= wire.FlagInline
			h.Total = 16
			h.MetaLen = 1 << 20
			return [][]byte{hdr(h), meta}
		}, nil, "bytes"},
		{"other structure, 10,000 nesting levels", func() [][]byte {
			deep := deepMeta(10000)
			h := send
			h.Flags |= wire.FlagInline
			h.Total, h.MetaLen, h.Hash = 16, int64(len(deep)), 12345
			return [][]byte{hdr(h), append(deep, make([]byte, 16)...)}
		}, tensordict.ErrMismatch, ""},
	}
	for _, c := range cases {
		mpitest.Run(t, c.name, func(t *testing.T) {
			if me > 1 {
				return // every rank runs the subtest, for agreement
			}
			if me == 0 {
				for _, m := range c.msgs() {
					require.NoError(t, mpi.Send(proto.LibComm(world), m, 1, tag))
				}
			} else {
				x := tensordict.New()
				require.NoError(t, x.Set(tensordict.K("x"), tensor.Zeros(tensor.Float32, 4)))
				td, err := x.Consolidate()
				require.NoError(t, err)
				ctx := mpitest.Ctx(t, hangLimit)
				start := time.Now()
				_, err = td.Recv(0, tensordict.WithConsolidated(), tensordict.WithTag(tag), tensordict.WithContext(ctx))
				took := time.Since(start)
				if assert.Error(t, err) {
					t.Logf("%s (%v)", clip(err.Error()), took.Round(time.Millisecond))
					assert.Less(t, len(err.Error()), maxErrorText, "error text of %d bytes", len(err.Error()))
					if c.want != nil {
						assert.ErrorIs(t, err, c.want)
					}
					if c.text != "" {
						assert.Contains(t, err.Error(), c.text)
					}
				}
				assert.Less(t, took, hangLimit)
			}
			// A normal Send/Recv works afterwards. (Not on the same tag:
			// after refusing a header, Recv drains the messages it
			// announces from that tag, awaiting each up to 2 s; these
			// headers lie, so a next transfer on the tag within those 2 s
			// would be taken for their payload. TestRecvOverLimit checks
			// the same tag after an honest refused header.)
			ctx := mpitest.Ctx(t, hangLimit)
			x := healthyTD(t)
			if me == 0 {
				require.NoError(t, x.Send(1, tensordict.WithConsolidated(), tensordict.WithTag(tag+1)))
			} else {
				zero(t, x)
				_, err := x.Recv(0, tensordict.WithConsolidated(), tensordict.WithTag(tag+1), tensordict.WithContext(ctx))
				require.NoError(t, err, "the Recv after a hostile message")
				assert.True(t, x.EqScalar(7).All())
			}
			checkHealthy(t, me)
		})
	}
}

// TestHostileBroadcastRoot makes rank 0 a crafted root of Broadcast: it
// calls the MPI collectives the protocol uses with crafted content while
// every other rank calls Broadcast.
func TestHostileBroadcastRoot(t *testing.T) {
	world := mpitest.Need(t, 2)
	me := world.Rank()
	c := proto.LibComm(world)
	// The layout of Broadcast's first message: a crafted root must match
	// its size, as every rank of an MPI broadcast passes the same count.
	bcastFirst := wire.BcastFirst
	bcastPrefix := wire.BcastPrefix
	maxReportedError := wire.MaxReportedError
	first := func(status, frameLen, more uint64, f []byte) []byte {
		b := make([]byte, bcastFirst)
		binary.LittleEndian.PutUint64(b, status)
		binary.LittleEndian.PutUint64(b[8:], frameLen)
		binary.LittleEndian.PutUint64(b[16:], more)
		copy(b[bcastPrefix:], f)
		return b
	}
	ones := bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 4)
	bh := wire.Header{Kind: wire.KindBroadcast, Flags: wire.FlagConsolidated, Leaves: 1}
	inlineFrame := func(meta []byte) []byte { return frame(bh, "", meta, ones, nil) }
	cases := []struct {
		name string
		root func(t *testing.T) // rank 0's side
		want any                // errors.Is target, *PeerError for errors.As, or nil
		text string
	}{
		{"negative shape", func(t *testing.T) {
			f := inlineFrame(hostileMeta("torch.float32", "[-4]", 0, 16))
			require.NoError(t, libBcast(c, first(0, uint64(len(f)), 0, f), 0))
			receiversRefused(t, world)
		}, nil, "x"},
		{"offset past the storage", func(t *testing.T) {
			f := inlineFrame(hostileMeta("torch.float32", "[4]", 1<<20, 1<<20+16))
			require.NoError(t, libBcast(c, first(0, uint64(len(f)), 0, f), 0))
			receiversRefused(t, world)
		}, nil, "x"},
		{"frame longer than the message", func(t *testing.T) {
			f := inlineFrame(hostileMeta("torch.float32", "[4]", 0, 16))
			require.NoError(t, libBcast(c, first(0, 1<<40, 0, f), 0))
			receiversRefused(t, world)
		}, nil, "frame"},
		{"garbage", func(t *testing.T) {
			b := make([]byte, bcastFirst)
			for i := range b {
				b[i] = byte(rand.IntN(256))
			}
			binary.LittleEndian.PutUint64(b, 0)
			binary.LittleEndian.PutUint64(b[16:], 0)
			require.NoError(t, libBcast(c, b, 0))
			receiversRefused(t, world)
		}, wire.ErrHeader, ""},
		{"error text without terminator", func(t *testing.T) {
			require.NoError(t, libBcast(c, first(1, 0, 0, bytes.Repeat([]byte("E"), bcastFirst)), 0))
		}, new(*tensordict.PeerError), "EEEE"},
		{"1 TB storage in more messages", func(t *testing.T) {
			h := bh
			h.Total, h.Chunk = 1<<40, wire.MaxChunk
			f := frame(h, "", hostileMeta("torch.float32", "[4]", 0, 16), nil, nil)
			require.NoError(t, libBcast(c, first(0, uint64(len(f)), 1, f), 0))
			receiversRefused(t, world)
		}, wire.ErrLimit, ""},
	}
	for _, tc := range cases {
		mpitest.Run(t, tc.name, func(t *testing.T) {
			rootsComparedNext(t, me, world.Size())
			if me == 0 {
				libAgreeRoot(t, world, 0)
				tc.root(t)
				endCollective(t, c)
			} else {
				ctx := mpitest.Ctx(t, hangLimit)
				start := time.Now()
				td, err := tensordict.New().Broadcast(0, tensordict.WithContext(ctx))
				took := time.Since(start)
				if !assert.Error(t, err, "Broadcast accepted a hostile root: %v", td) {
					err = errors.New("")
				}
				t.Logf("%s (%v)", clip(err.Error()), took.Round(time.Millisecond))
				switch w := tc.want.(type) {
				case error:
					assert.ErrorIs(t, err, w)
				case **tensordict.PeerError:
					// PeerError.Msg is documented as truncated to 1 KiB,
					// also when the source reports its failure in the
					// first message of Broadcast.
					if assert.ErrorAs(t, err, w) {
						assert.LessOrEqual(t, len((*w).Msg), maxReportedError, "PeerError.Msg of %d bytes", len((*w).Msg))
					}
				}
				if tc.text != "" {
					assert.Contains(t, err.Error(), tc.text)
				}
				assert.Less(t, len(err.Error()), maxErrorText, "error text of %d bytes", len(err.Error()))
				assert.Less(t, took, hangLimit)
			}
			broadcastStillWorks(t, me, "the Broadcast after a hostile root")
		})
	}
}

// receiversRefused takes part, as a crafted root, in the agreement after
// a broadcast's first message that its receivers refused: it learns the
// lowest rank that refused, whose error text that rank then broadcasts.
func receiversRefused(t *testing.T, g *group.Group) {
	t.Helper()
	size := g.Size()
	worst := []int32{int32(size), 1} // the lowest failing rank; 1: this rank has no context (see agree)
	require.NoError(t, libAgree(g, worst))
	require.Less(t, int(worst[0]), size, "a receiver refused")
	require.NoError(t, libBcast(proto.LibComm(g), make([]byte, wire.MaxReportedError), int(worst[0])))
}

// broadcastStillWorks checks that a genuine Broadcast from rank 0 works
// after a crafted or refused one (me is the caller's rank).
func broadcastStillWorks(t *testing.T, me int, what string) {
	t.Helper()
	var src *tensordict.TensorDict
	if me == 0 {
		src = healthyTD(t)
	}
	got, err := src.Broadcast(0)
	require.NoError(t, err, what)
	assert.True(t, got.EqScalar(7).All())
}

// rootsComparedNext makes the next broadcast on the world compare its
// roots before its first message, as the crafted roots here expect: the
// last two broadcasts every rank took come from different roots, rank 0
// and the last (a broadcast from the root of the last two starts at once,
// and its roots are compared after the first message).
func rootsComparedNext(t *testing.T, me, size int) {
	t.Helper()
	broadcastStillWorks(t, me, "before a crafted root")
	var src *tensordict.TensorDict
	if me == size-1 {
		src = healthyTD(t)
	}
	got, err := src.Broadcast(size - 1)
	require.NoError(t, err, "before a crafted root, from rank %d", size-1)
	assert.True(t, got.EqScalar(7).All())
}

// libBcast and libAllreduce are the collective steps a crafted peer takes
// on a group's library communicator: in MPI's nonblocking form, waited on,
// as the library runs every step there (MPI pairs no blocking collective
// with a nonblocking one). libAgree is the agreement step, in which the
// ranks combine the lowest failing rank and whether all have no context
// (xfer.Step.Agree) by point-to-point messages (xfer.Combine).
func libBcast[T mpi.Scalar](c *mpi.Comm, buf []T, root int) error {
	r, err := mpi.Ibcast(c, buf, root)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// libAgreeRoot takes part, as a crafted root, in the step that starts
// every rooted collective: the ranks compare the roots they passed
// (xfer.Step.AgreeRoot), here root.
func libAgreeRoot(t *testing.T, g *group.Group, root int) {
	t.Helper()
	_, _, _, err := xfer.NewStep(context.Background(), g).AgreeRoot(root, false)
	require.NoError(t, err)
}

func libAgree(g *group.Group, worst []int32) error {
	return xfer.Combine(xfer.NewStep(context.Background(), g), worst, mpi.OpMin)
}

func libAllreduce[T mpi.Scalar](c *mpi.Comm, buf []T, op mpi.Op) error {
	r, err := mpi.IallreduceInPlace(c, buf, op)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// endCollective takes part, as a crafted root, in the step that ends
// every tdmpi collective: the ranks compare whether a rank saw concurrent
// collectives on the group (tensordict's closeCollective).
func endCollective(t *testing.T, c *mpi.Comm) {
	t.Helper()
	require.NoError(t, libAllreduce(c, []uint8{0}, mpi.OpMax))
}

// maxErrorText bounds the error text a hostile message may cause: an
// error that grows with the input (a key path repeated at every nesting
// level) is itself a way to exhaust memory.
//
// This found the metadata decoder (tensordict/fromconsolidated.go)
// wrapping each nesting level's error with the child's full key, which
// made the error for metadata nested to the depth limit (1000 levels)
// some 1 MB of text, built in quadratic time; it now names the key once.
const maxErrorText = 64 << 10

// clip shortens s for the test log.
func clip(s string) string {
	if len(s) > 300 {
		return s[:150] + fmt.Sprintf(" ...(%d bytes)... ", len(s)-300) + s[len(s)-150:]
	}
	return s
}
