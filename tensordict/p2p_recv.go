// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// recvPhase is the next message a receive takes.
type recvPhase uint8

const (
	phaseHeader recvPhase = iota // the fixed-size header, on tag0
	phaseBody                    // the metadata (with an inline storage), on tag0
	phaseLeaves                  // per-leaf messages, leaf i on s.cur[i]
	phaseChunks                  // consolidated storage chunks on tag0, from byte i
	phaseDone
)

// recvOp is one receive of a Send transfer into td, taken one message at a
// time: Recv runs it to its end at once, IRecv a step at a time as its
// messages arrive. The caller holds s and its receive locks (s.held).
type recvOp struct {
	l     *link
	td    *TensorDict
	s     *p2pState
	h     wire.Header
	phase recvPhase
	i     int    // next leaf (phaseLeaves) or chunk offset (phaseChunks)
	dst   []byte // consolidated storage being received (phaseChunks)
	tag   int    // the last tag, once done
}

// ready reports whether the next message, on tag, may be received now:
// always when block (the receive then waits as the context allows), and
// otherwise when it has arrived or the context has ended (the receive then
// returns the context's error unless the message has just come, as a
// blocking receive would) or the xfer.Probe fails (the receive reports it).
func (r *recvOp) ready(tag int, block bool) bool {
	if block || r.l.Ctx.Err() != nil {
		return true
	}
	ok, _, err := mpi.Iprobe(r.l.Comm, r.l.Peer, tag)
	return ok || err != nil
}

// advance receives the transfer's messages in order, until the end (done)
// or, unless block, until the next one has not arrived yet (not done, nil
// error). An error ends the receive (done): the messages its sender still
// owes are drained first, except once the context has ended, as Recv
// documents.
func (r *recvOp) advance(block bool) (done bool, err error) {
	l, s := r.l, r.s
	for {
		switch r.phase {
		case phaseHeader:
			if !r.ready(s.tag0, block) {
				return false, nil
			}
			if err := xfer.RecvExact(l.Ctx, l.Comm, s.hdr, l.Peer, s.tag0); err != nil {
				return true, fmt.Errorf("waiting for the header: %w", err)
			}
			h, err := s.parseHeader(l)
			if err != nil {
				return true, err
			}
			r.h, r.phase = h, phaseBody
		case phaseBody:
			if !r.ready(s.tag0, block) {
				return false, nil
			}
			h := &r.h
			body := s.recvBody(int(h.Body()))
			if err := xfer.RecvExact(l.Ctx, l.Comm, body, l.Peer, s.tag0); err != nil {
				return true, fmt.Errorf("receiving the metadata: %w", errors.Join(err, l.drainUnlessDone(h, s.tag0, 0)))
			}
			if err := s.check(l, r.td, h, body); err != nil {
				return true, errors.Join(err, l.drainSend(h, s.tag0, false, 0))
			}
			if !l.o.consolidated {
				r.phase, r.i = phaseLeaves, 0
				continue
			}
			dst, err := s.payload(false)
			if err == nil {
				err = mem.Readable(dst) // MPI's C code writes it (see messages)
			}
			if err != nil {
				// The sender's storage must still be taken, or it stays blocked.
				return true, errors.Join(err, l.drainUnlessDone(h, s.tag0, 0))
			}
			if h.Flags&wire.FlagInline != 0 {
				copy(dst, body[h.MetaLen:])
				r.i = len(dst)
			} else {
				r.i = 0
			}
			r.dst, r.phase = dst, phaseChunks
		case phaseLeaves:
			if r.i == len(s.sorted) {
				r.tag = l.o.tag - 1
				if n := len(s.cur); n > 0 {
					r.tag = s.cur[n-1]
				}
				r.phase = phaseDone
				return true, nil
			}
			lf := &s.leaves[s.sorted[r.i]]
			b, err := lf.t.Bytes()
			if err == nil {
				err = mem.Readable(b) // MPI's C code writes it (see messages)
			}
			if err != nil {
				// Released or truncated storage, say: message i is still to come.
				return true, fmt.Errorf("key %v: %w", lf.key, errors.Join(err, l.drainUnlessDone(&r.h, s.tag0, int64(r.i))))
			}
			if !r.ready(s.cur[r.i], block) {
				return false, nil
			}
			if err := xfer.RecvExact(l.Ctx, l.Comm, b, l.Peer, s.cur[r.i]); err != nil {
				return true, fmt.Errorf("key %v: %w", lf.key, errors.Join(err, l.drainUnlessDone(&r.h, s.tag0, int64(r.i+1))))
			}
			r.i++
		case phaseChunks:
			if r.i >= len(r.dst) {
				r.tag, r.phase, r.dst = s.tag0, phaseDone, nil
				return true, mem.CatchFault(s.unstage) // into mapped leaves, maybe
			}
			if !r.ready(s.tag0, block) {
				return false, nil
			}
			if err := xfer.RecvChunk(l.Ctx, l.Comm, r.dst, r.i, l.Peer, s.tag0); err != nil {
				return true, err
			}
			r.i += wire.MaxChunk
		default:
			return true, nil
		}
	}
}

// drainRest consumes and discards what the sender still sends of a
// transfer whose header has arrived, exactly as the header announces and
// as a refused transfer is drained: each message is awaited at most
// drainIdle.
func (r *recvOp) drainRest() error {
	l, s, h := r.l, r.s, &r.h
	switch r.phase {
	case phaseBody:
		return l.drainSend(h, s.tag0, true, 0)
	case phaseLeaves:
		return l.drainSend(h, s.tag0, false, int64(r.i))
	case phaseChunks:
		return xfer.DrainChunks(l.Comm, l.Peer, s.tag0, int64((len(r.dst)-r.i+wire.MaxChunk-1)/wire.MaxChunk))
	}
	return nil
}
