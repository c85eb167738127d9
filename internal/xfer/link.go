// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// Link is one point-to-point operation in progress: the method, the group,
// its library communicator, the peer and the call's context, for the
// messages and the errors of the transfer.
type Link struct {
	Op    string // "InitRemote", "Recv", ...
	Group *group.Group
	Comm  *mpi.Comm // Group's library communicator
	Peer  int       // group rank of the other side (the root in broadcast mode)
	Dir   string    // "to", "from" or "root"
	Ctx   context.Context
}

// AnySource is a Link's Peer for a receive from whichever rank sends
// first (MPI_ANY_SOURCE), until its first message names the sender.
const AnySource = mpi.AnySource

// Arrived reports whether a message from l's peer waits on tag, without
// receiving it (MPI_Iprobe): true as well when the probe fails, so that
// the caller's receive reports the error.
func (l *Link) Arrived(tag int) bool {
	ok, _, err := mpi.Iprobe(l.Comm, l.Peer, tag)
	return ok || err != nil
}

// WaitingTag returns the tag of a message from l's peer that waits to be
// received on any tag, if one does (ok).
func (l *Link) WaitingTag() (tag int, ok bool) {
	ok, st, err := mpi.Iprobe(l.Comm, l.Peer, mpi.AnyTag)
	if err != nil || !ok {
		return 0, false
	}
	return st.Tag, true
}

// DescribeGroup names g for an error about a rank out of its range, so that
// a caller who passed a world rank to a subgroup sees the mix-up: "the
// world group", or "the group of world ranks [2 3]" (the first 16).
func DescribeGroup(g *group.Group) string {
	if g.IsWorld() {
		return "the world group"
	}
	const show = 16
	var b strings.Builder
	b.WriteString("the group of world ranks [")
	for i := range min(g.Size(), show) {
		if i > 0 {
			b.WriteByte(' ')
		}
		r, err := g.WorldRank(i)
		if err != nil {
			b.WriteString("?")
			continue
		}
		b.WriteString(strconv.Itoa(r))
	}
	if g.Size() > show {
		fmt.Fprintf(&b, " ... (%d ranks)", g.Size())
	}
	b.WriteByte(']')
	return b.String()
}

// Errorf returns "tensordict: <op>: rank <r> of <n>, <dir> rank <peer>: <msg>",
// or "<dir> any rank" for a receive from mpi.AnySource that has not
// matched its first message yet.
func (l *Link) Errorf(format string, args ...any) error {
	if l.Peer == mpi.AnySource {
		return fmt.Errorf("tensordict: %s: rank %d of %d, %s any rank: %w",
			l.Op, l.Group.Rank(), l.Group.Size(), l.Dir, fmt.Errorf(format, args...))
	}
	return fmt.Errorf("tensordict: %s: rank %d of %d, %s rank %d: %w",
		l.Op, l.Group.Rank(), l.Group.Size(), l.Dir, l.Peer, fmt.Errorf(format, args...))
}

// NotStarted returns an error wrapping the context's error if l's context
// has already ended: a send then sends nothing at all.
func (l *Link) NotStarted() error {
	if err := l.Ctx.Err(); err != nil {
		return l.Errorf("nothing sent: %w", err)
	}
	return nil
}

// SendMessages sends msgs[i] on tags[i] to l's peer, in order, as one
// transfer bounded by l's context; name names message i in errors.
//
// With a context that cannot end, each message is a blocking send
// (Link.Send), which gives up when the peer leaves the group. Otherwise
// every message is posted at once (MPI_Isend, in order, so that the
// receiver matches them exactly as it matches blocking sends) and the
// sends are polled until they complete or the context ends (FinishSends).
// A send MPI has started cannot be recalled: when the context ends first,
// the sends still incomplete are handed to package mpi (Request.Abandon),
// which completes them whenever the receiver takes them and keeps their
// buffers pinned until then, and gone reports true: the caller must not
// reuse those buffers. Since the whole transfer was posted, the receiver
// takes it whole or not at all, and a later transfer on the same tags
// queues behind it in MPI's order: the two cannot mix. A send given up as
// the peer left is handed over the same way, gone true.
func (l *Link) SendMessages(msgs [][]byte, tags []int, name func(int) string) (gone bool, err error) {
	if l.Ctx.Done() == nil {
		for i, m := range msgs {
			if gone, err := l.Send(m, tags[i]); err != nil {
				return gone, fmt.Errorf("sending %s: %w", name(i), err)
			}
		}
		return false, nil
	}
	if len(msgs) == 1 {
		// One message: posting it and waiting for it is one call into C,
		// with no Request unless the context ends first.
		ended, err := mpix.SendUntil(l.Comm, msgs[0], l.Peer, tags[0], l.Ctx.Done())
		switch {
		case err != nil:
			return false, fmt.Errorf("sending %s: %w", name(0), err)
		case ended:
			return true, fmt.Errorf("sending %s: given up as the context ended, incomplete (MPI delivers it if the receiver receives; see Send): %w",
				name(0), l.Ctx.Err())
		}
		return false, nil
	}
	reqs, err := PostSends(l, msgs, tags, name)
	n, werr := l.FinishSends(reqs)
	return n > 0, errors.Join(err, werr)
}

// copySendMin is the smallest message Send hands to mpix.SendCopy. Open
// MPI's shared-memory transport sends up to 256 bytes inline (its
// max_inline_send): a blocking send of those returns at once. A larger
// one returns only once the receiving process has entered MPI and taken
// it, which, when that process is busy outside MPI (making its next
// receive's result, say), holds the sender up. A C ping-pong of 320-byte
// messages whose ranks each spend 600 ns outside MPI after their send
// took 836 ns one way with MPI_Send, 417 with MPI_Isend waited for only
// before the next send, as with 192-byte messages (379-388).
const copySendMin = 257

// Send sends b to rank dest of c with tag, as a blocking mpi.Send: b may
// be reused once it returns. A message of copySendMin to
// mpix.CopySendMax bytes goes from a copy (mpix.SendCopy), which does not
// wait for the receiver to take it.
func Send(c *mpi.Comm, b []byte, dest, tag int) error {
	if len(b) >= copySendMin && len(b) <= mpix.CopySendMax {
		if sent, err := mpix.SendCopy(c, b, dest, tag); sent || err != nil {
			return err
		}
	}
	return mpi.Send(c, b, dest, tag)
}

// EagerSendMax returns the size of the largest message that MPI sends
// without its receiver, eagerly, on every transport of the MPI library in
// use: Open MPI's smallest eager limit is its shared-memory transport's,
// 4 KiB counting its own headers (mpix.CopySendMax, 4000 bytes, stays
// under it; its TCP transport's is 64 KiB), and MPICH's shared memory
// moved 8192 bytes in 1.8 us one way, 8256 in 6.5 (a rendezvous). A
// blocking send of such a message completes whether or not the receiver
// ever receives it, as long as the receiving process is in MPI, as a
// rank that leaves is (it waits in group.Finalize for the others' leave
// notices). A larger one waits for the receiver to take it, so a
// blocking send of it must see the receiver leave (Link.Send).
func EagerSendMax() int {
	if mpi.Library() == mpi.FamilyMPICH {
		return 8 << 10
	}
	return mpix.CopySendMax
}

// Send sends b to l's peer with tag, blocking: b may be reused once it
// returns with gone false. A message of at most EagerSendMax bytes is
// sent as Send sends it. A larger one is posted and waited for in C
// (mpix.SendUntil) until it completes or the peer leaves l's group
// (proto.Gone): the send, which the peer will never take, is then handed
// to package mpi (Request.Abandon), which keeps b pinned until it
// completes, gone is true, and the error wraps group.ErrPeerLeft naming
// the peer: the caller must not reuse b. A peer that left before the
// send is refused without posting anything.
func (l *Link) Send(b []byte, tag int) (gone bool, err error) {
	if len(b) <= EagerSendMax() {
		return false, Send(l.Comm, b, l.Peer, tag)
	}
	if err := l.PeerGone(); err != nil {
		return false, err
	}
	ended, err := mpix.SendUntil(l.Comm, b, l.Peer, tag, proto.Gone(l.Group, l.Peer))
	if ended {
		return true, l.leftDuring()
	}
	return false, err
}

// SendJoined sends head followed by tail to l's peer on tag as one
// message, MPI reading both where they lie (mpix.SendConcat), blocking,
// and returns when both may be reused (gone false); an error names the
// message name(0), as SendMessages does. A message longer than
// EagerSendMax is sent as SendBlocks sends it: gone true, when given up,
// leaves head and tail MPI's.
func (l *Link) SendJoined(head, tail []byte, tag int, name func(int) string) (gone bool, err error) {
	if len(head)+len(tail) <= EagerSendMax() {
		err = mpix.SendConcat(l.Comm, head, tail, l.Peer, tag)
	} else {
		blocks := [2][]byte{head, tail}
		gone, err = l.SendBlocks(blocks[:], tag)
	}
	if err != nil {
		return gone, fmt.Errorf("sending %s: %w", name(0), err)
	}
	return false, nil
}

// SendBlocks sends the bytes of blocks, one after the other, to l's peer
// on tag as one message, MPI reading each where it lies
// (mpix.SendBlocksUntil), and returns when all may be reused (gone false).
// It waits until the send completes, l's context ends or, without a
// context that can end, the peer leaves l's group: then gone is true, the
// blocks stay MPI's, and the error wraps the context's or
// group.ErrPeerLeft. The message holds at most wire.MaxChunk bytes.
func (l *Link) SendBlocks(blocks [][]byte, tag int) (gone bool, err error) {
	done := l.Ctx.Done()
	if done == nil {
		if err := l.PeerGone(); err != nil {
			return false, err
		}
		done = proto.Gone(l.Group, l.Peer)
	}
	ended, err := mpix.SendBlocksUntil(l.Comm, blocks, l.Peer, tag, done)
	switch {
	case !ended:
		return false, err
	case l.Ctx.Err() != nil:
		return true, fmt.Errorf("given up as the context ended, incomplete (MPI delivers it if the receiver receives): %w", l.Ctx.Err())
	}
	return true, l.leftDuring()
}

// PeerGone returns an error wrapping group.ErrPeerLeft if l's peer has
// left l's group, and nil otherwise: at the cost of an atomic load while
// no rank of any group has left (proto.Departures).
func (l *Link) PeerGone() error {
	if _, before := proto.Departures(); !before {
		return nil
	}
	return proto.Left(l.Group, l.Peer)
}

// leftDuring returns the error of sends given up, incomplete, as l's peer
// left its group.
func (l *Link) leftDuring() error {
	return fmt.Errorf("given up incomplete (MPI keeps the buffers until the send completes): %w", proto.Left(l.Group, l.Peer))
}

// Sends are the requests of posted sends (PostSends).
type Sends []*mpi.Request

// PostSends posts msgs[i] on tags[i] to l's peer, in order (MPI_Isend).
// If a post fails, it returns the requests of the messages already posted
// with the error: they must still be completed.
func PostSends(l *Link, msgs [][]byte, tags []int, name func(int) string) (Sends, error) {
	reqs := make(Sends, 0, len(msgs))
	for i, m := range msgs {
		r, err := mpi.Isend(l.Comm, m, l.Peer, tags[i])
		if err != nil {
			return reqs, fmt.Errorf("posting %s (message %d of %d): %w", name(i), i+1, len(msgs), err)
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

// FinishSends completes the sends reqs to l's peer: when l's context
// cannot end, it waits for them (Request.Await) until they complete or
// the peer leaves l's group (proto.Gone), and otherwise polls them (Poll)
// until they complete or the context ends. If the peer leaves or the
// context ends first, or a test fails, it abandons the sends still
// incomplete (see SendMessages) and returns how many, with an error
// wrapping group.ErrPeerLeft, the context's error or the test's error.
func (l *Link) FinishSends(reqs Sends) (abandoned int, err error) {
	ctx := l.Ctx
	if ctx.Done() == nil {
		err = awaitSends(reqs, proto.Gone(l.Group, l.Peer))
	} else {
		err = Poll(ctx, func() (bool, error) { return TestAll(reqs) })
	}
	if err == nil {
		return 0, nil
	}
	for _, r := range reqs {
		if done, _, _ := r.Test(); !done {
			r.Abandon()
			abandoned++
		}
	}
	if errors.Is(err, errGone) {
		return abandoned, fmt.Errorf("given up with %d of %d sends incomplete (MPI keeps their buffers until they complete): %w",
			abandoned, len(reqs), proto.Left(l.Group, l.Peer))
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return abandoned, fmt.Errorf("given up as the context ended, with %d of %d sends incomplete (MPI delivers them if the receiver receives; see Send): %w",
			abandoned, len(reqs), err)
	}
	if abandoned > 0 {
		err = fmt.Errorf("%w (%d of %d sends abandoned incomplete)", err, abandoned, len(reqs))
	}
	return abandoned, err
}

// errGone is awaitSends' error when gone closed first.
var errGone = errors.New("the peer left")

// awaitSends waits for every request of reqs to complete, in slices
// (Request.Await) between which it checks gone: once gone is closed, it
// returns errGone, with some of reqs incomplete. Otherwise its error
// joins those of the requests that failed.
func awaitSends(reqs []*mpi.Request, gone <-chan struct{}) error {
	var errs []error
	for _, r := range reqs {
		for {
			done, _, err := r.Await()
			if err != nil {
				errs = append(errs, err)
			}
			if done || err != nil {
				break
			}
			select {
			case <-gone:
				return errGone
			default:
			}
			mpix.Yield()
		}
	}
	return errors.Join(errs...)
}

// TestAll tests every request of reqs (MPI_Test) and reports whether all
// have completed; an error ends it.
func TestAll(reqs Sends) (bool, error) {
	all := true
	for _, r := range reqs {
		done, _, err := r.Test()
		if err != nil {
			return true, err
		}
		all = all && done
	}
	return all, nil
}

// MetaAlign pads meta with JSON white space so that a frame's storage,
// which follows the header, the class name and the metadata, starts 8-byte
// aligned in an 8-byte aligned buffer.
func MetaAlign(meta []byte, classLen int) []byte {
	for (wire.Size+classLen+len(meta))%8 != 0 {
		meta = append(meta, ' ')
	}
	return meta
}

// AlignedBuf returns n zero bytes, 8-byte aligned, on the Go heap.
func AlignedBuf(n int) []byte { return mem.Alloc(n) }

// msgBufs keeps the buffers PutMsgBuf hands back, by size class: class c
// holds the first bytes (*byte, which an interface holds without
// allocating) of buffers of 1<<c bytes.
var msgBufs [msgBufMaxClass + 1]sync.Pool

// msgBufMaxClass is the largest size class MsgBuf keeps (1 MiB): larger
// frames are rare, and would pin much memory in the pools.
const msgBufMaxClass = 20

// MsgBuf returns n bytes, 8-byte aligned, whose contents are undefined,
// for a message that is written whole before MPI sends it, or that a
// receive writes whole; once neither MPI nor the caller uses it any more
// (a blocking send or receive returned, or every request completed, and
// nothing refers to its bytes), PutMsgBuf may hand it to the next MsgBuf.
// Buffers of up to 1 MiB come from a pool by size class (powers of two),
// so that a loop of sends that each build a new message (an InitRemote of
// each new result, say), or of receives of small frames, neither
// allocates nor faults in new pages.
func MsgBuf(n int) []byte {
	c := bits.Len(uint(max(n, 8) - 1))
	if c > msgBufMaxClass {
		return mem.AllocUninit(n)
	}
	if p, ok := msgBufs[c].Get().(*byte); ok {
		return unsafe.Slice(p, 1<<c)[:n]
	}
	return mem.AllocUninit(1 << c)[:n]
}

// PutMsgBuf hands b, from MsgBuf, to a later MsgBuf. The caller must not
// use b afterwards, and MPI must no longer read it.
func PutMsgBuf(b []byte) {
	c := bits.Len(uint(cap(b)) - 1)
	if cap(b) < 8 || cap(b) != 1<<c || c > msgBufMaxClass {
		return // not from MsgBuf's pools
	}
	msgBufs[c].Put(unsafe.SliceData(b))
}

// AlignedCopy returns a copy of b, 8-byte aligned, on the Go heap.
func AlignedCopy(b []byte) []byte {
	c := mem.AllocUninit(len(b))
	copy(c, b)
	return c
}

// Aligned8 reports whether b starts at an 8-byte aligned address.
func Aligned8(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0
}
