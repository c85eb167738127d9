// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// link is one point-to-point operation in progress: the method, the group,
// its library communicator and the peer, for messages and errors.
type link struct {
	op   string // "InitRemote", "Recv", ...
	g    *group.Group
	c    *mpi.Comm
	peer int    // group rank of the other side
	dir  string // "to" or "from"
	o    remoteOptions
}

// newLink checks the resolved options o of op and the peer rank. It returns the
// link by value, so that the steady state of Send and Recv allocates
// nothing.
func newLink(op string, peer int, dir string, o remoteOptions) (link, error) {
	if err := o.check(op); err != nil {
		return link{}, err
	}
	l := link{op: op, g: o.group, c: o.group.LibComm(), peer: peer, dir: dir, o: o}
	if o.broadcast {
		if peer < 0 || peer >= l.g.Size() {
			return link{}, l.errorf("root rank %d is out of range [0, %d) of %s", peer, l.g.Size(), describeGroup(l.g))
		}
		return l, nil
	}
	switch {
	case peer < 0 || peer >= l.g.Size():
		return link{}, l.errorf("rank %d is out of range [0, %d) of %s", peer, l.g.Size(), describeGroup(l.g))
	case peer == l.g.Rank():
		return link{}, l.errorf("rank %d is the caller itself", peer)
	}
	return l, nil
}

// describeGroup names g for an error about a rank out of its range, so that
// a caller who passed a world rank to a subgroup sees the mix-up: "the
// world group", or "the group of world ranks [2 3]" (the first 16).
func describeGroup(g *group.Group) string {
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

// errorf returns "tensordict: <op>: rank <r> of <n>, <dir> rank <peer>: <msg>".
func (l *link) errorf(format string, args ...any) error {
	return fmt.Errorf("tensordict: %s: rank %d of %d, %s rank %d: %w",
		l.op, l.g.Rank(), l.g.Size(), l.dir, l.peer, fmt.Errorf(format, args...))
}

// Polling of a receive bounded by a context: Improbe is tried spinAttempts
// times, then between sleeps that double from minSleep up to maxSleep.
const (
	spinAttempts = 200
	minSleep     = 2 * time.Microsecond
	maxSleep     = time.Millisecond
)

// probe matches the next message from src with tag on c. If ctx can end,
// it polls with Improbe (see pollCtx) and returns ctx's error (wrapped by
// the caller) when ctx ends first; nothing is then consumed.
func probe(ctx context.Context, c *mpi.Comm, src, tag int) (m *mpi.Message, st mpi.Status, err error) {
	if ctx.Done() == nil {
		return mpi.Mprobe(c, src, tag)
	}
	err = pollCtx(ctx, func() (ok bool, err error) {
		m, ok, st, err = mpi.Improbe(c, src, tag)
		return ok, err
	})
	return m, st, err
}

// pollCtx calls try until it reports done or fails, spinning spinAttempts
// times, then sleeping between calls from minSleep, doubling up to
// maxSleep. It returns ctx's error if ctx ends first.
func pollCtx(ctx context.Context, try func() (done bool, err error)) error {
	sleep := minSleep
	for i := 0; ; i++ {
		if done, err := try(); err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if i < spinAttempts {
			continue
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		sleep = min(2*sleep, maxSleep)
	}
}

// discard receives the matched message m of n bytes and throws it away.
// The receive is exact, never truncated: Open MPI's single-copy path does
// not bound a truncated rendezvous receive by the buffer size. Small
// messages land on the stack, larger ones in a scratch anonymous mapping
// that is unmapped at once. head, if not nil, gets the message's first
// bytes.
func discard(m *mpi.Message, n int64, head []byte) error {
	if n <= 0 {
		_, err := mpi.Mrecv(m, []byte(nil))
		return err
	}
	if n <= 4096 {
		var sink [4096]byte
		_, err := mpi.Mrecv(m, sink[:n])
		copy(head, sink[:n])
		return err
	}
	buf, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("mapping %d bytes to discard a message: %w", n, err)
	}
	_, err = mpi.Mrecv(m, buf)
	copy(head, buf)
	return errors.Join(err, unix.Munmap(buf))
}

// drainIdle is how long a drain waits for each message it was told to
// expect before giving up on the rest.
const drainIdle = 2 * time.Second

// drainMessages consumes, in order, n messages from src, the i-th on tag
// tagOf(i): exactly the messages a refused transfer still owes, so that
// its sender is not left blocked and nothing of it stays queued for a
// later receive to take. A header can announce messages that never come
// (a faulty or hostile sender), so drainMessages waits at most drainIdle
// for each and then gives up with an error saying so; it never takes more
// than n messages.
func drainMessages(c *mpi.Comm, src int, n int64, tagOf func(i int64) int) error {
	for i := range n {
		tag := tagOf(i)
		ctx, cancel := context.WithTimeout(context.Background(), drainIdle)
		m, st, err := probe(ctx, c, src, tag)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("draining the refused transfer: message %d of %d (tag %d) did not come within %v", i+1, n, tag, drainIdle)
			}
			return fmt.Errorf("draining the refused transfer: message %d of %d (tag %d): %w", i+1, n, tag, err)
		}
		if err := discard(m, st.Bytes(), nil); err != nil {
			return fmt.Errorf("draining the refused transfer: message %d of %d (tag %d): %w", i+1, n, tag, err)
		}
	}
	return nil
}

// drainChunks consumes the n payload messages on tag (see drainMessages).
func drainChunks(c *mpi.Comm, src, tag int, n int64) error {
	return drainMessages(c, src, n, func(int64) int { return tag })
}

// appendChunks appends to msgs the messages of at most wire.MaxChunk
// bytes that b travels in, and their tag (tag) to tags; an empty b adds
// nothing. recvChunks receives them.
func appendChunks(msgs [][]byte, tags []int, b []byte, tag int) ([][]byte, []int) {
	for off := 0; off < len(b); off += wire.MaxChunk {
		msgs, tags = append(msgs, b[off:min(off+wire.MaxChunk, len(b))]), append(tags, tag)
	}
	return msgs, tags
}

// notStarted returns an error wrapping the context's error if l's context
// has already ended: a send then sends nothing at all.
func (l *link) notStarted() error {
	if err := l.o.ctx.Err(); err != nil {
		return l.errorf("nothing sent: %w", err)
	}
	return nil
}

// sendMessages sends msgs[i] on tags[i] to l's peer, in order, as one
// transfer bounded by l's context; name names message i in errors.
//
// With a context that cannot end, each message is a blocking send.
// Otherwise every message is posted at once (MPI_Isend, in order, so that
// the receiver matches them exactly as it matches blocking sends) and the
// sends are polled until they complete or the context ends (finishSends).
// A send MPI has started cannot be recalled: when the context ends first,
// the sends still incomplete are handed to package mpi (Request.Abandon),
// which completes them whenever the receiver takes them and keeps their
// buffers pinned until then, and gone reports true: the caller must not
// reuse those buffers. Since the whole transfer was posted, the receiver
// takes it whole or not at all, and a later transfer on the same tags
// queues behind it in MPI's order: the two cannot mix.
func (l *link) sendMessages(msgs [][]byte, tags []int, name func(int) string) (gone bool, err error) {
	if l.o.ctx.Done() == nil {
		for i, m := range msgs {
			if err := mpi.Send(l.c, m, l.peer, tags[i]); err != nil {
				return false, fmt.Errorf("sending %s: %w", name(i), err)
			}
		}
		return false, nil
	}
	reqs, err := postSends(l, msgs, tags, name)
	n, werr := finishSends(l.o.ctx, reqs)
	return n > 0, errors.Join(err, werr)
}

// postSends posts msgs[i] on tags[i] to l's peer, in order (MPI_Isend).
// If a post fails, it returns the requests of the messages already posted
// with the error: they must still be completed.
func postSends(l *link, msgs [][]byte, tags []int, name func(int) string) ([]*mpi.Request, error) {
	reqs := make([]*mpi.Request, 0, len(msgs))
	for i, m := range msgs {
		r, err := mpi.Isend(l.c, m, l.peer, tags[i])
		if err != nil {
			return reqs, fmt.Errorf("posting %s (message %d of %d): %w", name(i), i+1, len(msgs), err)
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

// finishSends completes the sends reqs: it waits for them (MPI_Waitall)
// when ctx cannot end, and otherwise polls them (pollCtx) until they
// complete or ctx ends. If ctx ends first, or a test fails, it abandons
// the sends still incomplete (see sendMessages) and returns how many,
// with an error wrapping ctx.Err() or the test's error.
func finishSends(ctx context.Context, reqs []*mpi.Request) (abandoned int, err error) {
	if ctx.Done() == nil {
		return 0, mpi.WaitAll(reqs...)
	}
	if err = pollCtx(ctx, func() (bool, error) { return testAll(reqs) }); err == nil {
		return 0, nil
	}
	for _, r := range reqs {
		if done, _, _ := r.Test(); !done {
			r.Abandon()
			abandoned++
		}
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

// testAll tests every request of reqs (MPI_Test) and reports whether all
// have completed; an error ends it.
func testAll(reqs []*mpi.Request) (bool, error) {
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

// recvExact receives the next message from src with tag into buf, which
// it must fill exactly, waiting for it until ctx ends. A message of another
// size is consumed and discarded, never received into buf (Open MPI's
// single-copy path would write past a short buffer), and recvExact returns
// an error. The caller must be the only one receiving from src on tag (it
// holds the tag's receive lock, or the tag is its transfer's own): the
// message probed is then the one received. It does not allocate, unless
// IRecvs are pending: it then polls, and steps them meanwhile (stepAll).
func recvExact(ctx context.Context, c *mpi.Comm, buf []byte, src, tag int) error {
	if ctx.Done() != nil || irecvQueues.n.Load() > 0 {
		// Polled, so that pending IRecvs proceed meanwhile (stepAll).
		err := pollCtx(ctx, func() (bool, error) {
			ok, _, err := mpi.Iprobe(c, src, tag)
			if err == nil && !ok {
				stepAll()
			}
			return ok, err
		})
		if err != nil {
			return err
		}
	}
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

// recvChunks receives b from src on tag, in the chunks sendChunks sent,
// waiting for each until ctx ends: a sender that announced a payload and
// stalls cannot hold the receiver past its deadline. After a chunk of the
// wrong size (discarded), the remaining chunks are drained; after ctx
// ends, nothing more is received.
func recvChunks(ctx context.Context, c *mpi.Comm, b []byte, src, tag int) error {
	for off := 0; off < len(b); off += wire.MaxChunk {
		if err := recvChunk(ctx, c, b, off, src, tag); err != nil {
			return err
		}
	}
	return nil
}

// recvChunk receives the chunk of b that starts at byte off, as
// recvChunks does.
func recvChunk(ctx context.Context, c *mpi.Comm, b []byte, off, src, tag int) error {
	part := b[off:min(off+wire.MaxChunk, len(b))]
	if err := recvExact(ctx, c, part, src, tag); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("payload at byte %d of %d: %w", off, len(b), err)
		}
		rest := int64((len(b) - off - len(part) + wire.MaxChunk - 1) / wire.MaxChunk)
		return fmt.Errorf("payload at byte %d: %w", off, errors.Join(err, drainChunks(c, src, tag, rest)))
	}
	return nil
}

// metaAlign pads meta with JSON white space so that a frame's storage,
// which follows the header, the class name and the metadata, starts 8-byte
// aligned in an 8-byte aligned buffer.
func metaAlign(meta []byte, classLen int) []byte {
	for (wire.Size+classLen+len(meta))%8 != 0 {
		meta = append(meta, ' ')
	}
	return meta
}

// alignedBuf returns n zero bytes, 8-byte aligned, on the Go heap.
func alignedBuf(n int) []byte { return mem.Alloc(n) }

// alignedCopy returns a copy of b, 8-byte aligned, on the Go heap.
func alignedCopy(b []byte) []byte {
	c := mem.AllocUninit(len(b))
	copy(c, b)
	return c
}

// sendPlan is what InitRemote sends: the storage, the metadata and the
// class name of a TensorDict laid out for consolidation.
type sendPlan struct {
	class  string
	meta   []byte // metadata JSON, padded by metaAlign
	total  int
	leaves int
	// storage is the consolidated storage when td already has one in the
	// planned layout; otherwise nil, and pack fills a buffer from p.
	storage []byte
	p       *plan
}

// planSend lays out td for sending, without copying any data.
func planSend(op string, td *TensorDict) (*sendPlan, error) {
	p, err := makePlan(op, td, 0, false)
	if err != nil {
		return nil, err
	}
	meta, err := encodeMetadata(p)
	if err != nil {
		return nil, err
	}
	sp := &sendPlan{class: td.class, total: p.total, p: p, leaves: len(p.flatten())}
	sp.meta = metaAlign(meta, len(sp.class))
	if c := td.cons; c != nil && c.base == 0 && c.end == c.st.Len() && c.end == p.total && inPlannedLayout(p, c.st) {
		sp.storage = c.st.Bytes()
	}
	return sp, nil
}

// inPlannedLayout reports whether every leaf of p views st at its planned
// offset, so that st's bytes are the consolidated storage.
func inPlannedLayout(p *plan, st *tensor.Storage) bool {
	if st.Released() {
		return false
	}
	for _, l := range p.flatten() {
		if l.t.Storage() != st || l.t.Offset() != l.start || !l.t.IsContiguous() {
			return false
		}
	}
	return true
}

// packInto writes the consolidated storage of sp into buf (len sp.total).
func (sp *sendPlan) packInto(buf []byte) error {
	if sp.storage != nil {
		copy(buf, sp.storage)
		return nil
	}
	return pack(buf, sp.p, true)
}

// bytes returns the consolidated storage of sp, packing it if needed.
func (sp *sendPlan) bytes() ([]byte, error) {
	if sp.storage != nil {
		return sp.storage, nil
	}
	buf := mem.AllocUninit(sp.total) // pack writes every byte, pads too
	if err := pack(buf, sp.p, true); err != nil {
		return nil, err
	}
	return buf, nil
}

// aligned8 reports whether b starts at an 8-byte aligned address.
func aligned8(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0
}
