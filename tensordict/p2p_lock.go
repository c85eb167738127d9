// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
)

// Send and Recv exchange several messages per call (a header, the metadata,
// then the payload) on tags the caller chooses. So that concurrent calls
// between the same ranks on the same tags cannot interleave their
// messages, each call holds, in every process, a lock per (communicator,
// peer, tag, direction) for the tags it uses. Holding the receive lock of
// a tag also makes it safe to probe a message and then receive it: no
// other receive of this package can take it in between. That lets the
// steady state check each message's size before receiving it (Open MPI's
// single-copy path writes past a receive buffer that is too small) without
// the allocation of a matched probe.

type p2pKey struct {
	c    *mpi.Comm
	peer int
	tag  int
	recv bool
}

var p2pLocks = struct {
	sync.Mutex
	m map[p2pKey]*sync.Mutex
}{m: map[p2pKey]*sync.Mutex{}}

// p2pLock returns the lock of k, creating it on first use.
func p2pLock(k p2pKey) *sync.Mutex {
	p2pLocks.Lock()
	mu, ok := p2pLocks.m[k]
	if !ok {
		mu = new(sync.Mutex)
		p2pLocks.m[k] = mu
	}
	p2pLocks.Unlock()
	return mu
}

// tagSet returns the distinct tags of tags, sorted, in dst.
func tagSet(dst, tags []int) []int {
	dst = append(dst[:0], tags...)
	slices.Sort(dst)
	return slices.Compact(dst)
}

// lockTags takes the locks of the sorted distinct tags (in order, so that
// two calls cannot deadlock) and returns them in held.
func lockTags(held []*sync.Mutex, c *mpi.Comm, peer int, recv bool, tags []int) []*sync.Mutex {
	held = held[:0]
	for _, t := range tags {
		mu := p2pLock(p2pKey{c: c, peer: peer, tag: t, recv: recv})
		mu.Lock()
		held = append(held, mu)
	}
	return held
}

func unlockAll(held []*sync.Mutex) {
	for i := len(held) - 1; i >= 0; i-- {
		held[i].Unlock()
	}
}

// recvExact receives a message from src with tag into buf, which it must
// fill exactly. The caller holds the receive lock of tag. A message of
// another size is consumed and discarded, and recvExact returns an error.
func recvExact(c *mpi.Comm, buf []byte, src, tag int) error {
	st, err := mpi.Probe(c, src, tag)
	if err != nil {
		return err
	}
	if n := st.Bytes(); n != int64(len(buf)) {
		err := fmt.Errorf("message of %d bytes on tag %d, want %d", n, tag, len(buf))
		m, st, perr := mpi.Mprobe(c, src, tag)
		if perr != nil {
			return fmt.Errorf("%w (and consuming it: %w)", err, perr)
		}
		if derr := discard(m, st.Bytes(), nil); derr != nil {
			return fmt.Errorf("%w (and consuming it: %w)", err, derr)
		}
		return err
	}
	_, err = mpi.Recv(c, buf, src, tag)
	return err
}

// recvChunksExact receives b from src on tag, in the chunks sendChunks
// sent, checking the size of each. The caller holds the receive lock. After
// a chunk of the wrong size (discarded), the remaining chunks are drained.
func recvChunksExact(c *mpi.Comm, b []byte, src, tag int) error {
	for off := 0; off < len(b); off += wire.MaxChunk {
		part := b[off:min(off+wire.MaxChunk, len(b))]
		if err := recvExact(c, part, src, tag); err != nil {
			rest := int64((len(b) - off - len(part) + wire.MaxChunk - 1) / wire.MaxChunk)
			return fmt.Errorf("payload at byte %d: %w", off, errors.Join(err, drainChunks(c, src, tag, rest)))
		}
	}
	return nil
}
