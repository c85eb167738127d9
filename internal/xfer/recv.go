// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// Probe matches the next message from src with tag on c into *m,
// waiting for it until ctx ends: with a blocking matched probe when no
// background receive is pending (mpix.MprobeUntil, which checks ctx
// between the slices of its wait in C), and otherwise by polling with
// Improbe (see Poll), stepping the pending background receives (StepAll)
// while nothing has come. It returns ctx's error (wrapped by the caller)
// when ctx ends first; nothing is then consumed. It does not allocate: m
// is the caller's.
//
// Without a context that can end, the wait ends when src leaves (see
// watchPeer): Probe then returns an error wrapping group.ErrPeerLeft,
// unless the message came before.
func Probe(ctx context.Context, c *mpi.Comm, src, tag int, m *mpi.Message) (st mpi.Status, err error) {
	if Pending() == 0 {
		if done := ctx.Done(); done != nil {
			st, ended, err := mpix.MprobeUntil(m, c, src, tag, done)
			if ended {
				return st, ctx.Err()
			}
			return st, err
		}
		for {
			done, left := watchPeer(c, src)
			if left != nil {
				return lastProbe(c, src, tag, m, left)
			}
			st, ended, err := mpix.MprobeUntil(m, c, src, tag, done)
			if !ended {
				return st, err
			}
		}
	}
	var done <-chan struct{} // nil: never closes
	var left error
	if ctx.Done() == nil {
		done, left = watchPeer(c, src)
	}
	err = Poll(ctx, func() (ok bool, err error) {
		ok, st, err = mpi.ImprobeInto(m, c, src, tag)
		switch {
		case err != nil || ok:
			return ok, err
		case left != nil:
			return true, left
		}
		StepAll()
		select {
		case <-done:
			done, left = watchPeer(c, src)
		default:
		}
		return false, nil
	})
	return st, err
}

// watchPeer returns, for a wait for src on c that no context bounds, the
// channel that closes when the next rank is found to have left a group
// (proto.Departures), and an error wrapping group.ErrPeerLeft if src has
// left c's group already. The wait gives the channel as its done channel,
// and calls watchPeer again when it closes. A rank sends what it sends
// before it leaves, so the wait looks for its message once more before it
// returns that error (lastProbe).
func watchPeer(c *mpi.Comm, src int) (<-chan struct{}, error) {
	done, before := proto.Departures()
	if before {
		if err := proto.PeerLeft(c, src); err != nil {
			return done, err
		}
	}
	return done, nil
}

// lastProbe matches the message from src with tag into *m if it has come,
// and otherwise returns left, src's leaving (watchPeer).
func lastProbe(c *mpi.Comm, src, tag int, m *mpi.Message, left error) (mpi.Status, error) {
	ok, st, err := mpi.ImprobeInto(m, c, src, tag)
	if ok || err != nil {
		return st, err
	}
	return st, left
}

// ProbeRecv is Probe that receives the message too when it can: when no
// background receive needs polling and the message is exactly len(guess)
// bytes, it is received into guess in the same call into MPI
// (mpix.RecvExactUntil) and got is true; bounded by a context that can
// end, only when guess is at most eagerMax bytes (a message whose bytes
// arrive with its match: a larger one is received with MPI_Imrecv, which
// can be given up, see RecvMatched). Otherwise the message is left
// matched in m, as Probe leaves it. A consolidated Recv of 16 leaves of
// 32 bytes with a context took 0.73 us one way when it polled from Go
// (Poll), 0.57-0.60 us so (0.55-0.61 without a context).
func ProbeRecv(ctx context.Context, c *mpi.Comm, src, tag int, m *mpi.Message, guess []byte) (st mpi.Status, got bool, err error) {
	if Pending() > 0 || ctx.Done() != nil && len(guess) > eagerMax {
		st, err = Probe(ctx, c, src, tag, m)
		return st, false, err
	}
	if done := ctx.Done(); done != nil {
		st, got, ended, err := mpix.RecvExactUntil(m, c, guess, src, tag, done)
		if ended {
			return st, false, ctx.Err()
		}
		return st, got, err
	}
	for {
		done, left := watchPeer(c, src)
		if left != nil {
			st, err := lastProbe(c, src, tag, m, left)
			return st, false, err
		}
		st, got, ended, err := mpix.RecvExactUntil(m, c, guess, src, tag, done)
		if !ended {
			return st, got, err
		}
	}
}

// Poll calls try until it reports done or fails, pausing between calls as
// a blocking receive of package mpi does (mpi.Pacer): not at all for 20
// us, then yielding the core, then, from 1 ms on, sleeping for 1/16 of the
// time waited. It returns ctx's error if ctx ends first, within a sleep's
// length (1 ms at most).
func Poll(ctx context.Context, try func() (done bool, err error)) error {
	var p mpi.Pacer
	for {
		if done, err := try(); err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.Pause()
	}
}

// AppendChunks appends to msgs the messages of at most wire.MaxChunk
// bytes that b travels in, and their tag (tag) to tags; an empty b adds
// nothing. RecvChunks receives them.
func AppendChunks(msgs [][]byte, tags []int, b []byte, tag int) ([][]byte, []int) {
	for off := 0; off < len(b); off += wire.MaxChunk {
		msgs, tags = append(msgs, b[off:min(off+wire.MaxChunk, len(b))]), append(tags, tag)
	}
	return msgs, tags
}

// ErrAbandoned is wrapped by the error of a receive whose context ended
// after MPI had matched its message and started writing it into the
// receive's buffer: such a receive cannot be recalled (MPI_Cancel does not
// cancel a matched receive), so it is handed to package mpi
// (mpi.Request.Abandon), which keeps the buffer pinned until MPI
// completes it, whenever that is (never, if the peer's link is dead). The
// buffer stays in MPI's hands: its contents are undefined and MPI may
// still write it, so the caller must neither read it as received data nor
// reuse, release or pool it.
var ErrAbandoned = errors.New("the receive was abandoned in MPI with its buffer: MPI may still write it")

// eagerMax is the size up to which a probed message is received with a
// blocking receive even when the context can end: it is well below the
// eager limit of every transport of Open MPI and MPICH (the smallest,
// Open MPI's shared memory, is 4 KiB with its headers), so such a message
// travels whole in its first fragment, and once a probe has matched it its
// bytes have arrived and the receive only copies them.
const eagerMax = 1024

// RecvExact receives the next message from src with tag into buf, which
// it must fill exactly, waiting for it until ctx ends (Probe). A message
// of another size is consumed and discarded, never received into buf
// (Open MPI's single-copy path would write past a short buffer), and
// RecvExact returns an error. The caller must be the only one receiving
// from src on tag (it holds the tag's receive lock, or the tag is its
// transfer's own), so that it takes the messages in their order. Without
// a context that can end, it does not allocate, and it makes the two MPI
// calls of a plain receive (MPI_Mprobe, MPI_Mrecv, in one call into C:
// mpix.RecvExact) unless background receives are pending: it then polls,
// and steps them meanwhile.
//
// When ctx can end, the wait for the message's bytes is bounded too
// (RecvMatched): a peer that stalls or whose link dies in the middle of a
// large message then cannot hold the receiver past its deadline; the
// receive, already matched, is abandoned, and the error wraps both
// ErrAbandoned and ctx's error: buf stays in MPI's hands (see
// ErrAbandoned).
func RecvExact(ctx context.Context, c *mpi.Comm, buf []byte, src, tag int) error {
	var m mpi.Message
	st, got, err := ProbeRecv(ctx, c, src, tag, &m, buf)
	if got || err != nil {
		return err
	}
	if n := st.Bytes(); n != int64(len(buf)) {
		err := fmt.Errorf("message of %d bytes on tag %d, want %d", n, tag, len(buf))
		if derr := Discard(&m, n, nil); derr != nil {
			return fmt.Errorf("%w (and consuming it: %w)", err, derr)
		}
		return err
	}
	return recvMatched(ctx, &m, buf, func() string {
		return fmt.Sprintf("%d-byte message on tag %d from rank %d", len(buf), tag, src)
	})
}

// RecvMatched receives the matched message m, of exactly len(buf) bytes
// (its probe measured it), into buf, bounded by ctx: with a blocking
// MPI_Mrecv when ctx cannot end or the message is at most eagerMax bytes
// (its bytes have then arrived with its match), and otherwise with
// MPI_Imrecv, waited for in C until it completes or ctx ends
// (mpix.MrecvUntil); then the receive is abandoned and the error wraps
// ErrAbandoned and ctx's error (buf stays in MPI's hands). what names the
// message in that error.
func RecvMatched(ctx context.Context, m *mpi.Message, buf []byte, what string) error {
	return recvMatched(ctx, m, buf, func() string { return what })
}

// recvMatched is RecvMatched with the message's name made only if needed.
func recvMatched(ctx context.Context, m *mpi.Message, buf []byte, what func() string) error {
	if ctx.Done() == nil || len(buf) <= eagerMax {
		_, err := mpi.Mrecv(m, buf)
		return err
	}
	_, ended, err := mpix.MrecvUntil(m, buf, ctx.Done())
	if ended {
		return fmt.Errorf("%s given up as the context ended, its receive already under way: %w: %w", what(), ErrAbandoned, ctx.Err())
	}
	return err
}

// RecvChunks receives b from src on tag, in the chunks sendChunks sent,
// waiting for each until ctx ends: a sender that announced a payload and
// stalls cannot hold the receiver past its deadline. After a chunk of the
// wrong size (discarded), the remaining chunks are drained; after ctx
// ends, nothing more is received.
func RecvChunks(ctx context.Context, c *mpi.Comm, b []byte, src, tag int) error {
	for off := 0; off < len(b); off += wire.MaxChunk {
		if err := RecvChunk(ctx, c, b, off, src, tag); err != nil {
			return err
		}
	}
	return nil
}

// RecvChunk receives the chunk of b that starts at byte off, as
// RecvChunks does.
func RecvChunk(ctx context.Context, c *mpi.Comm, b []byte, off, src, tag int) error {
	part := b[off:min(off+wire.MaxChunk, len(b))]
	if err := RecvExact(ctx, c, part, src, tag); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("payload at byte %d of %d: %w", off, len(b), err)
		}
		rest := int64((len(b) - off - len(part) + wire.MaxChunk - 1) / wire.MaxChunk)
		return fmt.Errorf("payload at byte %d: %w", off, errors.Join(err, DrainChunks(c, src, tag, rest)))
	}
	return nil
}

// RecvSized receives the next header message on tag from l.Peer, whose
// size this side learns only by probing it, into a buffer of exactly that
// size: into guess, in the same call into MPI (ProbeRecv), when it is
// guess's size (the steady state: the size of the last one), else, once
// the probe found its size n within [wire.Size, most], into the buffers
// buffer(n) returns: frame, or, when tail is not nil, frame followed by
// tail, in place (mpix.MrecvConcat; only for a receive whose context cannot
// end). A message outside that range is consumed and refused by refuse,
// given its first bytes (at most a header, or all of it when it is at most
// whole bytes), whose error it returns. inGuess reports that the message
// went into guess. When the receive into buffer(n) fails, frame is its
// first buffer: the caller gives it back unless the error wraps
// ErrAbandoned (MPI may still write it). InitRemote's and Recv's
// receivers share it.
func (l *Link) RecvSized(tag int, most, whole int64, guess []byte, buffer func(n int) (frame, tail []byte, err error), refuse func(head []byte, n int64) error) (frame []byte, inGuess bool, err error) {
	var m mpi.Message
	st, got, err := ProbeRecv(l.Ctx, l.Comm, l.Peer, tag, &m, guess)
	if err == nil && l.Peer == mpi.AnySource {
		l.Peer = st.Source // the rest of the transfer comes from its sender (see AnySource)
	}
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("waiting for the header: %w", err)
	case got && len(guess) < wire.Size: // an empty message, received for want of a guess
		return nil, false, fmt.Errorf("header message of %d bytes is shorter than a header: %w", len(guess), wire.ErrHeader)
	case got:
		return guess, true, nil
	}
	n := st.Bytes()
	if n < wire.Size || n > most {
		var first [wire.Size]byte
		head := first[:min(n, wire.Size)]
		if n <= whole {
			head = make([]byte, n)
		}
		if err := Discard(&m, n, head); err != nil {
			return nil, false, fmt.Errorf("header message of %d bytes, outside [%d, %d]: consuming it: %w", n, wire.Size, most, err)
		}
		return nil, false, refuse(head, n)
	}
	frame, tail, err := buffer(int(n))
	if err != nil {
		return nil, false, errors.Join(err, Discard(&m, n, nil))
	}
	if tail != nil {
		if _, err := mpix.MrecvConcat(&m, frame, tail); err != nil {
			return frame, false, fmt.Errorf("receiving the header message: %w", err)
		}
		return frame, false, nil
	}
	if err := RecvMatched(l.Ctx, &m, frame, "the header message"); err != nil {
		return frame, false, fmt.Errorf("receiving the header: %w", err)
	}
	return frame, false, nil
}
