// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// p2pLeaf is one tensor leaf of a TensorDict, in storage order, as Send and
// Recv see it.
type p2pLeaf struct {
	t   *tensor.Tensor
	key Key
	off int // byte offset in the consolidated layout
	n   int // bytes of data
}

// p2pState is what the transfers of a TensorDict keep with it between
// calls (its p2p field): Send, Recv, ISend and IRecv, InitRemote and
// broadcasts, which send from its layout and metadata, and the other
// collectives, which keep their plan in it. With it, a repeated
// transfer of an unchanged TensorDict encodes nothing and allocates
// nothing. mu guards the rest: a transfer holds it while it uses the
// state (a Send or Recv, for its whole transfer). The state remembers:
//
//   - What build made from the TensorDict: its leaves in storage order and
//     in tensordict's sorted order, the consolidated layout (total, and st
//     and base when the TensorDict's consolidated storage holds the leaves
//     in that layout), the two structure hashes, the metadata, the first
//     leaf that is not contiguous, whether any leaf is external memory, and metaTok, a
//     token of this build's metadata.
//   - What tells whether the TensorDict is still the one it was built from
//     (refresh): the edit counts of its nodes (mark), and whether its
//     non-tensor values are all scalars (plain). An edit since, a
//     composite value or st released rebuilds the state, which drops out,
//     rbody, stage, tags and taken below.
//   - What the collectives worked out of the TensorDict (coll, see
//     leafPlan), each part on its first use.
//   - Buffers reused by the next transfer: the incoming header (hdr), the
//     outgoing header message (out), the incoming metadata message
//     (rbody), the staging storage when st is nil (stage), the message
//     and tag lists of a send (msgs, mtags), the link of a Recv (rlink,
//     which keeps the caller's on its stack), and the per-leaf tags of the
//     last tag options (tags, for tagInit and tagPseudo). A send given up
//     while MPI reads its buffers detaches them (detach), a receive left
//     to MPI drops them (abandonRecv).
//   - The transfer in progress: its per-leaf tags (cur), header tag and
//     distinct tags (prepare), and the tag locks it holds (sendHeld,
//     recvHeld), which stay referenced for the next transfer and are
//     released once the state is collected.
//   - What came of earlier transfers: the record of non-tensor values the
//     TensorDict took from a sender (taken, see takeValues), and whether a
//     receive into its leaves was left to MPI (abandoned), which refuses
//     every later transfer.
//
// What a transfer needs to know of other TensorDicts' transfers is kept
// per group, not here: for each place, the metadata token last sent there
// and the metadata last received from there (see place), of which the
// state remembers the last it looked up (here), and InitRemote's kept
// structures (xfer.Kept).
type p2pState struct {
	mu sync.Mutex

	// Built from the TensorDict (build).
	leaves     []p2pLeaf // storage order: depth first, insertion order
	sorted     []int     // leaves indices in tensordict's sorted order
	total      int       // consolidated storage size
	st         *tensor.Storage
	base       int    // the layout's offset in st
	consHash   uint64 // structure in storage order (Signature)
	sortedHash uint64 // structure in sorted order, batch sizes ignored (hashSorted)
	meta       []byte // consolidated metadata (Layout), padded by xfer.MetaAlign
	metaLen    int    // len(meta) before padding
	contiguous Key    // the first non-contiguous leaf, or nil
	external   bool   // a leaf's storage is not Go heap memory (see guard)
	metaTok    *byte  // this build's metadata, as a place's last sent (see described)

	// Whether the TensorDict is unchanged since the build (refresh).
	mark  editMark
	plain bool

	// What the collectives worked out of the TensorDict since the build
	// (see leafPlanOf).
	coll *leafPlan

	// Buffers for the next transfer.
	hdr       []byte   // incoming header (its own pointer-free allocation, for cgo)
	out       []byte   // outgoing header message (see sendFrame)
	rbody     []byte   // incoming metadata message
	stage     []byte   // consolidated bytes when st is nil
	msgs      [][]byte // the messages of an outgoing transfer (see messages)
	mtags     []int    // and their tags
	rlink     link     // the link of the Recv in progress (see recv)
	tags      []int    // per-leaf tags for tagInit/tagPseudo (see leafTags)
	tagInit   int
	tagPseudo bool

	// The transfer in progress (see prepare), and its tag locks (see
	// xfer.Held), allocations of their own that the cleanup newP2PState
	// registers releases.
	cur      []int // per-leaf tags, nil in consolidated mode
	tag0     int   // tag of the header and metadata messages
	tagSet   []int // distinct tags, sorted
	sendHeld *xfer.Held
	recvHeld *xfer.Held

	// The place of the last transfer (see placeOf).
	here place

	// Earlier transfers.
	taken     *valuesRec // the non-tensor values td took (see takeValues)
	abandoned bool       // a receive into the leaves was left to MPI (abandonRecv)
}

// p2pStateOf returns td's state, locked, building or rebuilding it as
// needed. The caller unlocks it.
//
// The state lives in td itself (its p2p field), not in a table: it points
// back to td's nodes and tensors, so a table entry would keep td alive
// forever. As a field, it is collected with td.
func p2pStateOf(op string, td *TensorDict) (*p2pState, error) {
	s, err := stateOf(td)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	return s, s.refresh(op, td)
}

// tryP2PStateOf is p2pStateOf without waiting: it reports false, and
// holds nothing, when another call holds the state.
func tryP2PStateOf(op string, td *TensorDict) (*p2pState, bool, error) {
	s, err := stateOf(td)
	if err != nil {
		return nil, true, err
	}
	if !s.mu.TryLock() {
		return nil, false, nil
	}
	return s, true, s.refresh(op, td)
}

// lockState returns td's state locked, as p2pStateOf, waiting for another
// call that holds it no longer than l's context allows (tryP2PStateOf,
// xfer.Poll).
func lockState(l *link, td *TensorDict) (*p2pState, error) {
	if l.Ctx.Done() == nil {
		return p2pStateOf(l.Op, td)
	}
	var s *p2pState
	got := false // the last attempt found the state free (or failed)
	err := xfer.Poll(l.Ctx, func() (ok bool, err error) {
		s, ok, err = tryP2PStateOf(l.Op, td)
		got = ok
		return ok, err
	})
	switch {
	case err != nil && !got:
		return nil, fmt.Errorf("waiting for another transfer of this TensorDict: %w", err)
	case err != nil:
		return nil, err
	}
	return s, nil
}

// stateOf returns td's state, installing an empty one on first use.
func stateOf(td *TensorDict) (*p2pState, error) {
	if td == nil {
		return nil, errors.New("nil tensordict")
	}
	s := td.p2p.Load()
	if s == nil {
		// A concurrent first call may install its state first; both
		// then use that one.
		td.p2p.CompareAndSwap(nil, newP2PState())
		s = td.p2p.Load()
	}
	return s, nil
}

// newP2PState returns an empty state whose tag locks are released once
// it is unreachable.
func newP2PState() *p2pState {
	s := &p2pState{sendHeld: new(xfer.Held), recvHeld: new(xfer.Held)}
	runtime.AddCleanup(s, releaseHeld, [2]*xfer.Held{s.sendHeld, s.recvHeld})
	return s
}

// releaseHeld releases the tag locks of a state that is gone.
func releaseHeld(h [2]*xfer.Held) {
	h[0].Release()
	h[1].Release()
}

// refresh rebuilds s, locked, unless it still describes td: built,
// no node of td edited since (see editMark), every non-tensor value a
// scalar (a list or a map can change in place, behind the edit counts),
// and the storage it sends from not released. On error it unlocks s.
func (s *p2pState) refresh(op string, td *TensorDict) error {
	if s.abandoned {
		s.mu.Unlock()
		return fmt.Errorf("an earlier receive into this TensorDict was left to MPI, which may still write its leaves: %w", ErrReceiveAbandoned)
	}
	if s.leaves != nil && s.plain && s.mark.unedited(td) && s.live() {
		return nil
	}
	if err := s.build(op, td); err != nil {
		s.leaves = nil
		s.mu.Unlock()
		return err
	}
	s.mark.record(td)
	s.plain = plainValues(td)
	return nil
}

// plainValues reports whether every non-tensor value of td's tree is a
// scalar (nil, a bool, a number or a string): a list, a map or a stack can
// be edited in place, behind the edits count.
func plainValues(td *TensorDict) bool {
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTD:
			if !plainValues(e.td) {
				return false
			}
		case kindNonTensor:
			switch e.v.(type) {
			case nil, bool, int64, float64, string:
			default:
				return false
			}
		}
	}
	return true
}

// live reports whether the storage s sends from, if any, is not released.
func (s *p2pState) live() bool { return s.st == nil || !s.st.Released() }

// build (re)computes s for td.
func (s *p2pState) build(op string, td *TensorDict) error {
	// The metadata, as Layout gives it.
	var total int
	meta, err := withPlan("Layout", td, false, func(p *plan) ([]byte, error) {
		total = p.total
		return p.appendMetadata(nil)
	})
	if err != nil {
		return err
	}
	s.leaves = s.leaves[:0]
	s.contiguous = nil
	off := 0
	var walk func(prefix Key, n *TensorDict)
	walk = func(prefix Key, n *TensorDict) {
		for j := range n.entries {
			e := &n.entries[j]
			switch e.kind {
			case kindTensor:
				k := prefix.child(e.name)
				nb := e.t.NBytes()
				off = leafStart(off, e.t.DType())
				s.leaves = append(s.leaves, p2pLeaf{t: e.t, key: k, off: off, n: nb})
				off += nb + padTo8(nb)
				if s.contiguous == nil && !e.t.IsContiguous() {
					s.contiguous = k
				}
			case kindTD:
				walk(prefix.child(e.name), e.td)
			}
		}
	}
	walk(nil, td)
	if s.leaves == nil {
		s.leaves = []p2pLeaf{}
	}
	s.external = false
	for _, l := range s.leaves {
		s.external = s.external || l.t.Storage().External()
	}
	if off != total {
		return fmt.Errorf("tensordict: %s: layout of %d bytes, leaves sum to %d", op, total, off)
	}
	s.total = total
	s.meta = xfer.MetaAlign(meta, 0)
	s.metaLen = len(meta)
	s.st, s.base = nil, 0
	if c := td.cons; c != nil && !c.st.Released() && c.base+total <= c.st.Len() {
		s.st, s.base = c.st, c.base
		for _, l := range s.leaves {
			if l.t.Storage() != c.st || l.t.Offset() != c.base+l.off || !l.t.IsContiguous() {
				s.st, s.base = nil, 0
				break
			}
		}
	}
	s.sorted = make([]int, len(s.leaves))
	for i := range s.sorted {
		s.sorted[i] = i
	}
	slices.SortStableFunc(s.sorted, func(a, b int) int { return codec.CompareKeys(s.leaves[a].key, s.leaves[b].key) })
	s.consHash = signature(td)
	s.sortedHash = s.hashSorted()
	s.out, s.rbody, s.stage, s.tags = nil, nil, nil, nil
	s.taken, s.coll = nil, nil
	s.metaTok = new(byte)
	if s.hdr == nil {
		s.hdr = xfer.AlignedBuf(wire.Size)
	}
	return nil
}

// hashSorted is the structure hash of the leaves in sorted order, without
// the batch size: what a per-leaf transfer's header carries.
func (s *p2pState) hashSorted() uint64 {
	h := codec.NewHasher(codec.SortedOrder, nil, len(s.sorted))
	for _, i := range s.sorted {
		l := &s.leaves[i]
		h.TensorLeaf(l.key[:len(l.key)-1], l.key[len(l.key)-1], l.t)
	}
	return h.Sum64()
}

// payload returns the consolidated bytes of the TensorDict: a view of its
// storage, or the staging buffer, packed from the leaves when pack is true.
func (s *p2pState) payload(pack bool) ([]byte, error) {
	if s.st != nil {
		return s.st.Bytes()[s.base : s.base+s.total : s.base+s.total], nil
	}
	if s.stage == nil {
		s.stage = xfer.AlignedBuf(s.total)
	}
	if pack {
		for i := range s.leaves {
			if err := s.copyLeaf(i, true); err != nil {
				return nil, err
			}
		}
	}
	return s.stage, nil
}

// unstaged ends a consolidated receive into s: when the storage was
// received into the staging buffer, it copies it into the leaves
// (unstage), under guard, since a leaf may be a mapping.
func (s *p2pState) unstaged() error {
	if s.st != nil {
		return nil
	}
	return s.guard(s.unstage)
}

// unstage copies the staging buffer into the leaves.
func (s *p2pState) unstage() error {
	for i := range s.leaves {
		if err := s.copyLeaf(i, false); err != nil {
			return err
		}
	}
	return nil
}

// copyLeaf copies leaf i into the staging buffer (out) or back (!out).
func (s *p2pState) copyLeaf(i int, out bool) error {
	l := &s.leaves[i]
	area := s.stage[l.off : l.off+l.n]
	if l.t.IsContiguous() {
		b, err := l.t.Bytes()
		if err != nil {
			return fmt.Errorf("key %v: %w", l.key, err)
		}
		if out {
			copy(area, b)
		} else {
			copy(b, area)
		}
		return nil
	}
	view, err := tensor.FromBytes(l.t.DType(), area, l.t.Shape()...)
	if err == nil {
		if out {
			err = view.CopyFrom(l.t)
		} else {
			err = l.t.CopyFrom(view)
		}
	}
	if err != nil {
		return fmt.Errorf("key %v: %w", l.key, err)
	}
	return nil
}

// leafTags returns the per-leaf tags for initTag and pseudoRand, cached.
func (s *p2pState) leafTags(initTag int, pseudoRand bool) ([]int, error) {
	if s.tags == nil || s.tagInit != initTag || s.tagPseudo != pseudoRand {
		s.tags = xfer.LeafTags(make([]int, 0, len(s.leaves)), len(s.leaves), initTag, pseudoRand)
		s.tagInit, s.tagPseudo = initTag, pseudoRand
	}
	if n := len(s.tags); n > 0 && s.tags[n-1] >= MaxUserTag {
		return nil, fmt.Errorf("%d leaves from tag %d need tags up to %d, beyond the last user tag %d", n, initTag, s.tags[n-1], MaxUserTag-1)
	}
	return s.tags, nil
}

// guard runs f, which reads or writes the leaves or the storage of s,
// under mem.CatchFault when one of them is external memory (a file
// mapping, which another process may truncate under it), and plainly
// otherwise: Go heap memory cannot fault, and each check costs about 8 ns
// (one per leaf and side for a per-leaf transfer of 16 leaves: 0.12 us).
func (s *p2pState) guard(f func() error) error {
	if s.external {
		return mem.CatchFault(f)
	}
	return f()
}

// readable is mem.Readable(b), for b the memory of a leaf or the storage
// of s, when it may fault (see guard).
func (s *p2pState) readable(b []byte) error {
	if s.external {
		return mem.Readable(b)
	}
	return nil
}

// storageView returns the storage s views (s.st is not nil: td's
// consolidated storage), its last byte read first: a mapping of a file
// another process truncated gives an error wrapping memmap.ErrFault
// instead of a fault inside MPI's C code.
func (s *p2pState) storageView() (b []byte, err error) {
	err = s.guard(func() (err error) {
		if b, err = s.payload(true); err == nil {
			mem.ReadLast(b)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the consolidated storage: %w", err)
	}
	return b, nil
}

// sendFrame returns the outgoing header message of a transfer with
// header h, in a buffer of s that the next transfer reuses: h, then the
// metadata unless the transfer is described (h.MetaLen is 0), then,
// inline, room for the storage.
func (s *p2pState) sendFrame(h *wire.Header, inline bool) []byte {
	n := wire.Size + int(h.MetaLen)
	if inline {
		n += s.total
	}
	if cap(s.out) < n {
		s.out = xfer.AlignedBuf(n)
	}
	frame := s.out[:n]
	wire.Put(frame, h)
	copy(frame[wire.Size:], s.meta[:h.MetaLen])
	return frame
}

// described reports whether a transfer of s with l's options can leave
// its metadata out (wire.FlagDescribed): an earlier transfer since s was
// built carried it to the same peer on the same tag, in the same mode,
// and no transfer of another TensorDict (or of another build of s)
// carried other metadata there since: the receiver takes the non-tensor
// values of a place from the last metadata sent there (p2p_values.go).
// The receiver checks a transfer by the header's structure hash, leaf
// count and size alone; the metadata only lets it name the first key that
// differs, which the first transfer to a place still does.
func (s *p2pState) described(l *link) bool {
	return s.placeOf(l).sent.Load() == s.metaTok
}

// markDescribed records that a transfer of s with l's options, not
// described before, carries the metadata.
func (s *p2pState) markDescribed(l *link) {
	s.placeOf(l).sent.Store(s.metaTok)
}

// recvBody returns a buffer of n bytes for the incoming metadata message,
// kept for later calls.
func (s *p2pState) recvBody(n int) []byte {
	if cap(s.rbody) < n {
		s.rbody = xfer.AlignedBuf(n)
	}
	return s.rbody[:n]
}

// An editMark is a tree's nodes, depth first, with the edit count of each
// (see TensorDict.edited) as they were when it was recorded: what a call
// keeps of a TensorDict to learn, at the next call, whether anything it
// worked out of the tree's entries still holds (the transfer state, see
// p2pState.refresh).
type editMark struct {
	nodes []*TensorDict
	edits []uint64
}

// record records td's nodes and their edit counts, reusing m's memory.
func (m *editMark) record(td *TensorDict) {
	clear(m.nodes[:cap(m.nodes)]) // no stale node stays reachable from m
	m.nodes, m.edits = appendNodes(m.nodes[:0], td), m.edits[:0]
	for _, n := range m.nodes {
		m.edits = append(m.edits, n.edits)
	}
}

// unedited reports whether no node of td was edited since m recorded
// their counts: then td holds the same entries (the same tensors, nested
// nodes and non-tensor values, though a composite value may have been
// changed in place), batch sizes, lock states and class names. It reads
// the nodes m recorded, not td's entries: a node that gained, lost or
// replaced a child was edited itself, so while no count has moved, the
// recorded nodes are still td's tree (16 leaves in one node: one
// comparison, not a walk of 16 entries).
func (m *editMark) unedited(td *TensorDict) bool {
	if len(m.nodes) == 0 || m.nodes[0] != td {
		return false
	}
	for i, n := range m.nodes {
		if n.edits != m.edits[i] {
			return false
		}
	}
	return true
}

// appendNodes appends td and its nodes, depth first.
func appendNodes(dst []*TensorDict, td *TensorDict) []*TensorDict {
	dst = append(dst, td)
	for i := range td.entries {
		if e := &td.entries[i]; e.kind == kindTD {
			dst = appendNodes(dst, e.td)
		}
	}
	return dst
}

// holds are the storages one transfer hands to MPI (see coll.Holds).
type holds = coll.Holds

// holding runs f, a transfer that gives MPI the bytes of st (nil: none),
// with st held, and returns f's error (see holds).
func holding(st *tensor.Storage, f func() error) error {
	var h holds
	if err := h.Add(st); err != nil {
		return err
	}
	err := f()
	h.End(err)
	return err
}

// hold holds, in h, the storages of s's TensorDict that a transfer may give
// MPI: its consolidated storage, or every leaf's.
func (s *p2pState) hold(h *holds) error {
	if s.st != nil {
		return h.Add(s.st)
	}
	for i := range s.leaves {
		if err := h.Add(s.leaves[i].t.Storage()); err != nil {
			h.End(nil) // nothing was given to MPI
			return fmt.Errorf("key %v: %w", s.leaves[i].key, err)
		}
	}
	return nil
}

// holdForISend holds the storages of s's TensorDict for an ISend (see
// hold), in holds of their own that its Pending keeps, or returns nil when
// there are none to hold.
func (s *p2pState) holdForISend() (*holds, error) {
	h := new(holds)
	if err := s.hold(h); err != nil {
		return nil, err
	}
	if h.Empty() {
		return nil, nil
	}
	return h, nil
}
