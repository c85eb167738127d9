// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
)

// BenchmarkRemoteSteadyParts times, on rank 0 alone, the steps of a
// consolidated Send and Recv of 16 leaves of 64 bytes in their steady
// state, without the MPI calls: the bookkeeping that makes a small
// transfer cost 1.6-2.2x a raw message (see docs/performance.md). Each
// step is reported as ns/call, over stepReps calls per iteration, so that
// make bench's -benchtime 20x is enough; alternating ping-pong runs on a
// shared machine cannot resolve the 10-50 ns a change to one of them
// makes. The steps are not independent of each other's caches: their sum
// is a little less than the time they add to a transfer.
func BenchmarkRemoteSteadyParts(b *testing.B) {
	g := benchGroup(b, 2)
	if g.Rank() != 0 {
		return
	}
	td := consolidatedTD(b, 16, 64)
	sendOpts := []SendOption{WithGroup(g), WithConsolidated()} // as tdmpi bench passes them
	recvOpts := []RecvOption{WithGroup(g), WithConsolidated()}
	l := new(link)
	resolveInto(&l.o, sendOpts, usesSend)
	if err := l.init("Send", 1, "to"); err != nil {
		b.Fatal(err)
	}
	s, err := lockState(l, td)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.prepare(l); err != nil {
		b.Fatal(err)
	}
	msgs, _, _, err := s.messages(l, false, true)
	if err != nil {
		b.Fatal(err)
	}
	frame := append([]byte(nil), msgs[0]...) // what the receiver gets
	clear(msgs)
	s.mu.Unlock()

	const stepReps = 20000
	for _, step := range []struct {
		name string
		f    func() error
	}{
		{"SendLink", func() error { return steadyLink(sendOpts) }},
		{"RecvLink", func() error { return steadyRecvLink(recvOpts) }},
		{"LockState", func() error {
			s, err := lockState(l, td)
			if err == nil {
				s.mu.Unlock()
			}
			return err
		}},
		{"RecvState", func() error {
			s, err := recvState(l, td)
			if err == nil {
				s.mu.Unlock()
			}
			return err
		}},
		{"TagLocks", func() error {
			err := s.sendHeld.LockCtx(&l.Link, false, s.tagSet)
			s.sendHeld.Unlock()
			return err
		}},
		{"Messages", func() error {
			msgs, _, _, err := s.messages(l, false, true)
			clear(msgs)
			return err
		}},
		{"InitRefLookup", func() error {
			s.mu.Lock()
			r := l.KeepRef(td.class, s.meta[:s.metaLen], s.consHash, int64(len(s.leaves)), int64(s.total))
			s.mu.Unlock()
			return keptOrDescribed(l, r)
		}},
		{"GotBody", func() error {
			copy(s.hdr, frame)
			r := recvOp{l: l, td: td, s: s}
			var err error
			if r.h, err = s.parseHeader(l, false); err != nil {
				return err
			}
			_, err = r.gotBody(frame[wire.Size:])
			return err
		}},
	} {
		b.Run(step.name, func(b *testing.B) {
			var spent time.Duration
			for range b.N {
				start := time.Now()
				for range stepReps {
					if err := step.f(); err != nil {
						b.Fatal(err)
					}
				}
				spent += time.Since(start)
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N*stepReps), "ns/call")
		})
	}
}

// steadyLink resolves a Send's options into a link on its stack, as Send
// does.
//
//go:noinline
func steadyLink(opts []SendOption) error {
	var lv link
	resolveInto(&lv.o, opts, usesSend)
	return lv.init("Send", 1, "to")
}

// steadyRecvLink is steadyLink for Recv.
//
//go:noinline
func steadyRecvLink(opts []RecvOption) error {
	var lv link
	resolveInto(&lv.o, opts, usesRecv)
	return lv.init("Recv", 1, "from")
}

// keptOrDescribed completes r as a sent frame would (xfer.Link.KeptSent),
// so that the next InitRemote of its structure is described by it, and
// says whether r was described.
func keptOrDescribed(l *link, r xfer.Kept) error {
	l.KeptSent(r, nil)
	if !r.Described && r.Ref == 0 {
		return errors.New("neither kept nor described")
	}
	return nil
}
