// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"

	"github.com/tdmpi/tdmpi/internal/xfer"
)

// AnySource, given as the source rank of FromRemoteInit, Recv or IRecv,
// receives from whichever rank of the group sends first, as MPI's
// MPI_ANY_SOURCE and torch.distributed's recv(src=None): the whole
// transfer (its header, metadata and payload messages) comes from that
// one rank, which Source names afterwards. It is point to point only:
// FromRemoteInit refuses it with WithBroadcast (a broadcast has a root)
// and with WithTorch, and InitRemote, Send and ISend refuse it as a
// destination. Its value is no rank, nor -1, which Source returns for a
// TensorDict nothing was received into.
//
// The header of the transfer is matched from any rank (a matched probe,
// MPI_Mprobe, which no other receive can take from under it), and the
// rest received from its sender. Until it has matched its header, a
// receive from AnySource holds the receive locks of its tags for every
// rank of the group, and IRecvs take their transfers in the order they
// were called: a Recv or IRecv from any source waits for the IRecvs
// called before it, from any rank, that share one of its tags, and a
// Recv or IRecv from one rank waits for the IRecvs from AnySource called
// before it on one of its tags. WithContext bounds every wait of it, as
// for a receive from one rank.
const AnySource = -2

// Source returns the rank of the group that the last receive into td came
// from: the sender of the TensorDict FromRemoteInit returned (the root,
// with WithBroadcast), or of the last Recv or IRecv into td that
// succeeded. It is -1 for a TensorDict nothing was received into, and for
// the nested TensorDicts of a received one. With AnySource, it names the
// rank that sent.
func (td *TensorDict) Source() int {
	if td == nil {
		return -1
	}
	return int(td.source) - 1
}

// receivedFrom records that a receive into td came from rank src, and
// returns td (nil is nothing).
func (td *TensorDict) receivedFrom(src int) *TensorDict {
	if td != nil && src >= 0 {
		td.source = int32(src + 1)
	}
	return td
}

// initAnySource checks a receive from AnySource (l.Op's) for point to
// point, and makes l's peer MPI's wildcard until its first message is
// matched (see link.recvSized).
func (l *link) initAnySource() error {
	l.Peer = xfer.AnySource
	switch {
	case l.Dir != "from":
		return l.Errorf("AnySource names no rank to send to")
	case l.o.torch:
		return l.Errorf("AnySource is not supported with WithTorch: torch's recv takes its source rank")
	}
	return nil
}

// Source returns the rank an IRecv received from once it has completed
// without error (after Wait, a Test that reported it done, or WaitAny):
// the rank it named, or the sender it matched with AnySource. It returns
// -1 before then, after an error, and for an ISend or a collective.
func (p *Pending) Source() int {
	if p == nil || p.r == nil || !p.over || p.err != nil {
		return -1
	}
	return p.r.src
}

// WaitAny waits until one of the transfers ps has completed, as MPI's
// MPI_Waitany, and returns its index in ps and its error (the error its
// Wait returns). The Pending at that index is complete: its Wait returns
// at once, and an IRecv's Source names its sender. A nil entry, or a
// Pending whose completion was already reported (by Wait, by a Test that
// returned true, or by an earlier WaitAny), is inactive and skipped, so
// that a loop can call WaitAny again after replacing the completed entry,
// with a new IRecv say, or setting it to nil. When every entry is
// inactive, WaitAny returns -1 and a nil error at once (MPI returns
// MPI_UNDEFINED).
//
// It waits as Wait does: it steps the pending IRecvs (as every receive
// of this package does) and tests the others, pausing between rounds as
// a blocking receive does: not at all for 20 us, then yielding the core,
// and from 1 ms on sleeping up to 1 ms between rounds; a round in which
// an IRecv took a message starts the pauses over. Each transfer's own
// context (WithContext) still bounds it: one whose context ends
// completes with its error, which WaitAny then returns with its index.
func WaitAny(ps []*Pending) (int, error) {
	idx, active := -1, false
	var err error
	round := func() (bool, error) {
		active = false
		moved := false
		for i, p := range ps {
			if p.inactive() {
				continue
			}
			active = true
			done := false
			if p.r != nil {
				moved = p.r.progress() || moved
				if done = p.r.over.Load(); done {
					p.endIRecv()
				}
			} else {
				done, _ = p.Test()
			}
			if done {
				idx, err = i, p.Wait() // complete: returns its result at once
				return true, nil
			}
		}
		return !active || moved, nil
	}
	for {
		// A round in which an IRecv moved returns: the pauses start over.
		_ = xfer.Poll(context.Background(), round) // its context cannot end
		if idx >= 0 || !active {
			return idx, err
		}
	}
}

// inactive reports whether p is nil or its completion has been reported
// (see WaitAny).
func (p *Pending) inactive() bool {
	switch {
	case p == nil:
		return true
	case p.c != nil:
		return p.c.Over()
	}
	return p.over
}
