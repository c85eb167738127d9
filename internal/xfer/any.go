// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/mpi"
)

// SendAny sends x, a []int64 or a []byte, to l's peer on tag, blocking,
// or, with bcast, broadcasts it from root l.Peer (a blocking MPI_Bcast,
// which matches ranks of other programs that call it so, as torch's do).
func (l *Link) SendAny(x any, tag int, bcast bool) error {
	switch x := x.(type) {
	case []int64:
		if bcast {
			return mpi.Bcast(l.Comm, x, l.Peer)
		}
		return mpi.Send(l.Comm, x, l.Peer, tag)
	case []byte:
		if bcast {
			return mpi.Bcast(l.Comm, x, l.Peer)
		}
		return mpi.Send(l.Comm, x, l.Peer, tag)
	}
	return fmt.Errorf("xfer: SendAny: buffer of type %T", x)
}

// RecvAny receives into x, a []int64 or a []byte, the next message about
// what: with bcast a broadcast from root l.Peer (a blocking MPI_Bcast,
// which l's context does not bound), else a message from l.Peer on tag,
// matched by a Probe and received as RecvMatched receives, both bounded by
// l's context. A message whose size is not x's is received into scratch
// memory, thrown away and refused with an error wrapping bad.
func (l *Link) RecvAny(x any, tag int, bcast bool, what string, bad error) (err error) {
	var want int64
	switch x := x.(type) {
	case []int64:
		want = int64(len(x)) * 8
	case []byte:
		want = int64(len(x))
	default:
		return fmt.Errorf("xfer: RecvAny: buffer of type %T", x)
	}
	if bcast {
		switch x := x.(type) {
		case []int64:
			err = mpi.Bcast(l.Comm, x, l.Peer)
		case []byte:
			err = mpi.Bcast(l.Comm, x, l.Peer)
		}
		if err != nil {
			return fmt.Errorf("receiving %s: %w", what, err)
		}
		return nil
	}
	var m mpi.Message
	st, err := Probe(l.Ctx, l.Comm, l.Peer, tag, &m)
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	if n := st.Bytes(); n != want {
		return fmt.Errorf("%s is a message of %d bytes, want %d: %w", what, n, want, errors.Join(bad, Discard(&m, n, nil)))
	}
	switch x := x.(type) {
	case []int64:
		_, err = mpi.Mrecv(&m, x)
	case []byte:
		err = RecvMatched(l.Ctx, &m, x, what)
	}
	if err != nil {
		return fmt.Errorf("receiving %s: %w", what, err)
	}
	return nil
}

// DrainAny receives and throws away the next n messages from l's peer on
// tag (DrainMessages).
func (l *Link) DrainAny(n int64, tag int) error {
	return DrainMessages(l.Comm, l.Peer, n, func(int64) int { return tag })
}
