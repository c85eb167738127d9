package tensordict

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// The collective operations (Broadcast, AllReduce, Reduce, AllGather,
// Scatter, GatherAndStack) share the plumbing of this file. Each is called
// by every rank of a group, in the same order on every rank, as MPI
// collectives are. Each runs on the group's library communicator, holding
// the group's protocol lock, so collectives of several goroutines on one
// group never interleave.
//
// None of them hangs on a rank's bad input. Anything one rank finds wrong
// before the payload moves (a leaf that cannot be reduced, a peer's header
// over the limits, a context already done, a different structure) is made
// known to every rank by a small agreement collective, and then every rank
// returns an error. Every step is waited on with the call's context (see
// internal/xfer.Step): a rank whose peers never reach a step returns, and
// breaks the group.

// collCall is one collective call in progress on one rank.
type collCall struct {
	xfer.Step        // the group, its library communicator and the call's context
	op        string // the method name, for errors: "AllReduce"
	rank      int
	size      int
	lim       wire.Limits
	// consolidated is WithConsolidated: Broadcast receives into the
	// receiver's storage when the layouts match.
	consolidated bool
	// deferSteps makes the reduction, once the ranks agreed, post its steps
	// and leave them to Pending.Wait (IAllReduce, IReduce).
	deferSteps bool
	// busy reports whether another goroutine of this process runs a
	// collective on the group at the same time (group.Collective).
	busy func() bool
	// held: the storages this rank's steps give MPI (see holds), until
	// the call ends, or, deferred, until its Pending completes.
	held holds
}

// ErrConcurrent is matched (errors.Is) by the error of a collective on a
// group on which some rank has run two collectives at once, from two
// goroutines. MPI pairs collectives by their order on each rank, so such
// calls could combine different TensorDicts without any error: instead,
// from the first call a rank finds another one running beside it, every
// collective on that group fails on every rank (see proto.Collective)
// and moves nothing. Run concurrent collectives on groups of their own
// (group.Group.New). A rank whose goroutines happen to run one after the
// other, in an order that differs from another rank's, cannot be told
// apart from a correct program; that is MPI's own rule, which tdmpi cannot
// check.
var ErrConcurrent = errors.New("concurrent collectives on one group")

// closeCollective ends a collective on every rank of s's group, whatever
// err (this rank's outcome) is: the ranks compare, with one small
// allreduce, whether a second goroutine came to a collective on the group
// while this one ran on any of them. If one did, MPI may have paired this
// call with another call on some rank, and every rank returns errBusy (the
// result is undefined); the agreement at the start of every later
// collective then fails too. On a group this call broke (a step given up),
// there is nothing to close: the other ranks are not at this step.
func closeCollective(s xfer.Step, busy func() bool, err error, errorf func(string, ...any) error) error {
	if errors.Is(err, group.ErrBroken) {
		return err
	}
	flag := []uint8{0}
	if busy() {
		flag[0] = 1
	}
	if aerr := xfer.Allreduce(s, flag, mpi.OpMax); aerr != nil {
		return errors.Join(err, errorf("closing the collective: %w", aerr))
	}
	if flag[0] != 0 && err == nil {
		return errorf("the result is undefined: %w", errBusy)
	}
	return err
}

// ready returns the error that stops this rank before the payload moves:
// the context's, or ErrConcurrent, or nil.
func (cl *collCall) ready() error {
	if err := cl.Ctx.Err(); err != nil {
		return err
	}
	if cl.busy != nil && cl.busy() {
		return errBusy
	}
	return nil
}

var errBusy = fmt.Errorf("two goroutines of one rank have run collectives on this group at once: %w", ErrConcurrent)

// errorf returns an error "tensordict: <op>: rank <r> of <n>: <message>".
func (cl *collCall) errorf(format string, args ...any) error {
	return fmt.Errorf("tensordict: %s: rank %d of %d: %w", cl.op, cl.rank, cl.size, fmt.Errorf(format, args...))
}

// wrap returns err prefixed like errorf, or nil.
func (cl *collCall) wrap(err error) error {
	if err == nil {
		return nil
	}
	return cl.errorf("%w", err)
}

// rootRange returns an error naming what if r is not a rank of the
// group, without the op prefix.
func (cl *collCall) rootRange(what string, r int) error {
	if r < 0 || r >= cl.size {
		return fmt.Errorf("%s %d is out of range [0, %d) of %s", what, r, cl.size, xfer.DescribeGroup(cl.Group))
	}
	return nil
}

// agreeRoot is the first step of a collective whose ranks each pass its
// root r (Broadcast): before any message of the collective is posted, the
// ranks compare their roots (xfer.Step.AgreeRoot), and every rank returns
// an error wrapping ErrMismatch, naming the lowest and the highest root
// passed, when they differ; then, the same on every rank, rootRange's
// error when r is not a rank of the group.
func (cl *collCall) agreeRoot(what string, r int) error {
	lo, hi, _, err := cl.AgreeRoot(r, false)
	switch {
	case err != nil:
		return cl.errorf("agreeing on the %s: %w", what, outOfStep(err))
	case lo != hi:
		return cl.errorf("ranks passed different roots (%s %d and %d; this rank %d): %w", what, lo, hi, r, ErrMismatch)
	}
	return cl.wrap(cl.rootRange(what, r))
}

// runCollective checks the resolved options o, takes the group's protocol
// lock and runs f, then the closing step (closeCollective). It logs the
// start (with root, unless negative, and bytes(rank), when bytes is not
// nil and the line is written) and any error.
func runCollective(op string, root int, bytes func(rank int) int64, o remoteOptions, f func(cl *collCall) error) error {
	_, err := startCollective(op, root, bytes, o, false, f)
	return err
}

// startCollective is runCollective and, with deferSteps, its asynchronous
// form: f defers its steps once the ranks agreed (coll.deferSteps), the
// closing step is posted after them, and the returned collPending
// completes them all. Failures before the steps are posted are returned at
// once. Without deferSteps the collPending is nil.
func startCollective(op string, root int, bytes func(rank int) int64, o remoteOptions, deferSteps bool, f func(cl *collCall) error) (*collPending, error) {
	if err := o.check(op); err != nil {
		return nil, xfer.LogFailed(op, err)
	}
	g := o.group
	cl := &collCall{Step: xfer.NewStep(o.ctx, g), op: op, rank: g.Rank(), size: g.Size(), lim: fullLimits(o.limits()),
		consolidated: o.consolidated, deferSteps: deferSteps}
	var p *collPending
	err := proto.Collective(g, func(busy func() bool) error {
		if err := proto.Broken(g, "tensordict: "+op); err != nil {
			return err
		}
		cl.busy = busy
		xfer.LogCollStart(op, g, root, bytes)
		err := f(cl)
		if !deferSteps {
			err = closeCollective(cl.Step, busy, err, cl.errorf)
			cl.held.End(err)
			return err
		}
		p, err = cl.closeDeferred(busy, err)
		return err
	})
	if err != nil {
		return nil, xfer.LogFailed(op, err)
	}
	if deferSteps && p == nil {
		p = &collPending{op: op, over: true} // nothing was deferred: complete
	}
	return p, nil
}

// outOfStep returns err, the error of an agreement step, also wrapping
// ErrMismatch when the agreement's result shows that the ranks are not in
// the same collective (xfer.ErrOutOfStep).
func outOfStep(err error) error {
	if errors.Is(err, xfer.ErrOutOfStep) {
		return fmt.Errorf("%w (%w)", err, ErrMismatch)
	}
	return err
}

// maxReportedError bounds the text of a rank's error that agree passes to
// the other ranks.
const maxReportedError = wire.MaxReportedError

// PeerError is returned by a collective on the ranks that were ready when
// another rank of the group was not: its own error is passed to all.
type PeerError struct {
	Op   string // the collective, such as "AllReduce"
	Rank int    // the group rank that failed
	Msg  string // its error text, truncated to 1 KiB
}

// Error returns "rank <r> failed: <its error>". The collective returns it
// wrapped with its own name and rank.
func (e *PeerError) Error() string {
	return fmt.Sprintf("rank %d failed: %s", e.Rank, e.Msg)
}

// agree makes every rank learn whether some rank failed before the payload
// moved. local is this rank's own error, or nil, without the
// "tensordict: <op>" prefix. If no rank failed, agree returns nil on every
// rank. Otherwise a failing rank returns its own error and every other rank
// returns a *PeerError carrying the error text of the lowest failing rank,
// both wrapped with the op and the rank.
func (cl *collCall) agree(local error) error {
	r, err := cl.Agree(local != nil)
	if err != nil {
		return cl.errorf("agreeing on failures: %w", outOfStep(errors.Join(err, local)))
	}
	return cl.spread(r, local)
}

// spread returns nil if r == size (nobody failed), else passes rank r's
// error text to every rank, as agree does. r comes from the other ranks,
// and is checked first (xfer.Step.CheckFailed).
func (cl *collCall) spread(r int, local error) error {
	if err := cl.CheckFailed(r, local != nil); err != nil {
		return cl.errorf("%w", outOfStep(errors.Join(err, local)))
	}
	if r == cl.size {
		return nil
	}
	msg := make([]byte, maxReportedError)
	if r == cl.rank {
		copy(msg, local.Error())
	}
	if err := xfer.Bcast(cl.Step, msg, r); err != nil {
		return cl.errorf("passing rank %d's error: %w", r, errors.Join(err, local))
	}
	if local != nil {
		return cl.wrap(local)
	}
	return cl.errorf("%w", &PeerError{Op: cl.op, Rank: r, Msg: nulTerminated(msg)})
}

// fullLimits returns l with its unset fields at the wire defaults, so that
// they can bound FromConsolidated too.
func fullLimits(l wire.Limits) wire.Limits {
	d := wire.DefaultLimits()
	if l.MaxTotal <= 0 {
		l.MaxTotal = d.MaxTotal
	}
	if l.MaxMeta <= 0 {
		l.MaxMeta = d.MaxMeta
	}
	if l.MaxClass <= 0 {
		l.MaxClass = d.MaxClass
	}
	if l.MaxInline <= 0 {
		l.MaxInline = d.MaxInline
	}
	return l
}

// StructureError is returned by AllReduce, Reduce and GatherAndStack on
// every rank (it matches ErrMismatch with errors.Is) when the ranks' TensorDicts differ in structure: keys, dtypes
// or shapes of their tensor leaves, or batch size. The check runs before
// any payload moves, so no rank is left waiting.
type StructureError struct {
	Op   string // the collective, such as "AllReduce"
	Ref  int    // the rank whose structure the others were compared with
	Rank int    // the first rank whose structure differs from Ref's
	// Key is the first differing leaf in sorted depth-first order, or nil
	// when the batch sizes differ.
	Key    Key
	Detail string // what differs, such as "float32[3] on rank 2, float32[4] on rank 0"
}

// Error returns a message naming the ranks and the key.
func (e *StructureError) Error() string {
	where := "batch size"
	if e.Key != nil {
		where = "key " + e.Key.String()
	}
	return fmt.Sprintf("structure of rank %d differs from rank %d at %s: %s", e.Rank, e.Ref, where, e.Detail)
}

// Is reports whether target is ErrMismatch, so that errors.Is(err,
// ErrMismatch) holds for collectives as it does for Recv.
func (e *StructureError) Is(target error) bool { return target == ErrMismatch }

// sortedLeaves returns td's tensor leaves in sorted depth-first order, the
// order every rank reduces them in, whatever order they were inserted in.
func sortedLeaves(td *TensorDict) []Item {
	items := td.Items(IncludeNested(), LeavesOnly())
	slices.SortStableFunc(items, func(a, b Item) int { return codec.CompareKeys(a.Key, b.Key) })
	return items
}

// A leafPlan is what the collectives work out of a TensorDict's tensor
// leaves, each part on its first use: for those that need the same
// structure on every rank (AllReduce, Reduce, GatherAndStack), the leaves
// in sorted order, the structure hash the ranks compare and what
// reducible checks (structure); for a reduction, whether the leaves tile
// one storage (fastSpan) and the steps otherwise (reduceSteps,
// reduceLayout); for those that send a TensorDict as a block (AllGather,
// GatherAndStack, Scatter), its layout and metadata (blockLayout). A
// TensorDict keeps its plan (TensorDict.plan) for the next call, which
// takes it while no node of the tree was edited: the same tensors, whose
// dtypes, shapes, strides, storages and offsets never change, under the
// same keys, batch sizes and class names. What can change behind the edit
// counts, a storage released or a mapped file truncated, is checked on
// every call (reducible; the block's pack). Sorting, hashing and checking
// the leaves on every call took about half of an AllReduce of 256 leaves
// of 64 bytes (87-95 us, np 2, where raw MPI reduces the bytes in 7-13);
// encoding the metadata and laying the TensorDict out, 41% of Scatter's
// source with 256 leaves.
//
// A plan's parts are written once each (sync.Once); until the next
// collective replaces it, a plan keeps the tensors it was made of alive.
type leafPlan struct {
	mark editMark
	// plain: every non-tensor value of the tree is a scalar (plainValues),
	// so that its metadata changes only with an edit.
	plain bool

	structOnce sync.Once
	leaves     []Item // sorted depth-first key order (sortedLeaves)
	hash       uint64 // structureHash
	// For reducible: each dtype and each storage with the index of its
	// first leaf (in leaves), and the first leaf that repeats elements
	// (an Expand result), len(leaves) for none.
	dtypes   []planDType
	storages []planStorage
	repeats  int

	// A reduction's layout (reduceLayout): fastSpan's result, and the
	// steps of a reduction leaf by leaf otherwise (reduceSteps).
	reduceOnce sync.Once
	span       []byte
	layout     uint64
	fast       bool
	steps      []reduceStep

	// The TensorDict laid out as a block (blockLayout), for a plain one,
	// kept from its second call on.
	blockCalls atomic.Int32
	blockOnce  sync.Once
	block      block
	blockErr   error
}

// planDType is a dtype of a plan's leaves and the first leaf of it.
type planDType struct {
	dt    tensor.DType
	first int
}

// planStorage is a storage of a plan's leaves and the first leaf in it.
type planStorage struct {
	st    *tensor.Storage
	first int
}

// leafPlanOf returns td's plan, made anew when td was edited since the
// last one (or has none). A new plan has none of its parts worked out.
func leafPlanOf(td *TensorDict) *leafPlan {
	if p := td.plan.Load(); p != nil && p.mark.unedited(td) {
		return p
	}
	p := &leafPlan{plain: plainValues(td)}
	p.mark.record(td)
	td.plan.Store(p)
	return p
}

// td returns the TensorDict p was made of.
func (p *leafPlan) td() *TensorDict { return p.mark.nodes[0] }

// structure works out p's sorted leaves, structure hash and what
// reducible checks on its first call, and returns p.
func (p *leafPlan) structure() *leafPlan {
	p.structOnce.Do(func() {
		td := p.td()
		p.leaves = sortedLeaves(td)
		p.hash = structureHash(td, p.leaves)
		p.repeats = len(p.leaves)
		seen := make(map[*tensor.Storage]bool)
		for i, it := range p.leaves {
			x := it.Tensor
			if !slices.ContainsFunc(p.dtypes, func(d planDType) bool { return d.dt == x.DType() }) {
				p.dtypes = append(p.dtypes, planDType{dt: x.DType(), first: i})
			}
			if st := x.Storage(); !seen[st] {
				seen[st] = true
				p.storages = append(p.storages, planStorage{st: st, first: i})
			}
			if p.repeats == len(p.leaves) && repeatsElements(x) {
				p.repeats = i
			}
		}
	})
	return p
}

// reduceLayout works out p's structure and reduction layout on its
// first call and returns p. It reads the leaves' bytes
// (tensor.Storage.Bytes), which marks a storage of the receive pool as
// seen (package rawbytes): a GatherAndStack, which only copies the leaves,
// does not need it.
func (p *leafPlan) reduceLayout() *leafPlan {
	p.structure()
	p.reduceOnce.Do(func() {
		p.span, p.layout, p.fast = fastSpan(p.leaves)
		p.steps = reduceSteps(p.leaves)
	})
	return p
}

// blockLayout returns p's TensorDict laid out as a block (see
// prepareBlock): ok is false when the TensorDict has composite non-tensor
// values, which a caller may change in place, and must be laid out on
// every call. The layout is kept from the second call on: kept from the
// first, a TensorDict sent once (Scatter's are often new on every call)
// only kept it alive longer, and a Scatter of two new TensorDicts of 256
// leaves took 7-11% more time than without the plan (the collector's);
// kept from the second, 4-6% (the plan itself). With TensorDicts sent
// again, that Scatter took half the time (57-62 -> 29-33 us, np 2).
func (p *leafPlan) blockLayout() (b block, ok bool, err error) {
	if !p.plain {
		return block{}, false, nil
	}
	if p.blockCalls.Add(1) == 1 {
		b, err = layBlock(p.td())
		return b, true, err
	}
	p.blockOnce.Do(func() { p.block, p.blockErr = layBlock(p.td()) })
	return p.block, true, p.blockErr
}

// describeStructure returns the structure of td, given its sorted leaves:
// what the ranks exchange to explain a mismatch.
func describeStructure(td *TensorDict, leaves []Item) codec.Structure {
	d := codec.Structure{Batch: td.BatchSize(), Leaves: make([]codec.StructLeaf, len(leaves))}
	for i, it := range leaves {
		d.Leaves[i] = codec.StructLeaf{Key: codec.Key(it.Key), DType: it.Tensor.DType(), Shape: it.Tensor.Shape()}
	}
	return d
}

// encodeStructure returns the JSON encoding of d, which the ranks exchange
// on a mismatch.
func encodeStructure(d codec.Structure) []byte {
	b, err := json.Marshal(d)
	if err != nil {
		// Keys are strings, dtypes and shapes ints: Marshal cannot fail.
		panic("tensordict: encoding a structure description: " + err.Error())
	}
	return b
}

// structureHash returns the structure hash of td, given its sorted leaves:
// the batch size, and each leaf's key, dtype and shape, in sorted order. It
// is what the ranks compare before a reduction; describeStructure, which
// explains a difference, is only built when the hashes differ.
func structureHash(td *TensorDict, leaves []Item) uint64 {
	h := codec.NewHasher(codec.SortedOrder, td.batch, len(leaves))
	for _, it := range leaves {
		h.TensorLeaf(it.Key[:len(it.Key)-1], it.Key[len(it.Key)-1], it.Tensor)
	}
	return h.Sum64()
}

// describeLeaf formats a leaf as "float32[3 4]".
func describeLeaf(l codec.StructLeaf) string { return fmt.Sprintf("%v%v", l.DType, l.Shape) }

// diffRanks compares d, the structure of rank me, with ref, the structure of
// rank r. It returns the first differing key (nil for the batch size) and
// a description, or ok true when they are the same.
func diffRanks(d codec.Structure, me int, ref codec.Structure, r int) (k Key, detail string, ok bool) {
	if !slices.Equal(d.Batch, ref.Batch) {
		return nil, fmt.Sprintf("%v on rank %d, %v on rank %d", d.Batch, me, ref.Batch, r), false
	}
	i, j := 0, 0
	for i < len(d.Leaves) || j < len(ref.Leaves) {
		var c int
		switch {
		case i == len(d.Leaves):
			c = 1
		case j == len(ref.Leaves):
			c = -1
		default:
			c = codec.CompareKeys(d.Leaves[i].Key, ref.Leaves[j].Key)
		}
		switch {
		case c < 0:
			return Key(d.Leaves[i].Key), fmt.Sprintf("%s on rank %d, missing on rank %d", describeLeaf(d.Leaves[i]), me, r), false
		case c > 0:
			return Key(ref.Leaves[j].Key), fmt.Sprintf("missing on rank %d, %s on rank %d", me, describeLeaf(ref.Leaves[j]), r), false
		}
		a, b := d.Leaves[i], ref.Leaves[j]
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
			return Key(a.Key), fmt.Sprintf("%s on rank %d, %s on rank %d", describeLeaf(a), me, describeLeaf(b), r), false
		}
		i++
		j++
	}
	return nil, "", true
}

// Bounds of the exchange that explains a structure mismatch. They are
// constants, not limits a caller sets, so that every rank makes the same
// decision from the same numbers.
const (
	maxDescBytes = 64 << 20 // largest reference description broadcast
	diffSlot     = 4 << 10  // bytes per rank of the gathered differences
)

// slotDiff is one rank's difference as exchanged in a diffSlot.
type slotDiff struct {
	Key    Key    `json:"k"`
	Detail string `json:"d"`
}

// explainMismatch runs on every rank once the structure hashes disagreed.
// It broadcasts the reference rank's description, lets each rank compare
// its own with it, gathers the differences, and returns the same
// *StructureError on every rank: the lowest differing rank's.
func (cl *collCall) explainMismatch(mine codec.Structure, ref int) error {
	var enc []byte
	if cl.rank == ref {
		enc = encodeStructure(mine)
	}
	n := []int64{int64(len(enc))}
	if err := xfer.Bcast(cl.Step, n, ref); err != nil {
		return cl.errorf("structures differ; broadcasting rank %d's structure: %w", ref, err)
	}
	if n[0] < 0 || n[0] > maxDescBytes {
		return cl.errorf("structures differ between ranks (rank %d's description of %d bytes is too long to compare)", ref, n[0])
	}
	if cl.rank != ref {
		enc = make([]byte, n[0])
	}
	if err := xfer.Bcast(cl.Step, enc, ref); err != nil {
		return cl.errorf("structures differ; broadcasting rank %d's structure: %w", ref, err)
	}
	slot := make([]byte, diffSlot)
	if cl.rank != ref {
		var rd codec.Structure
		var sd slotDiff
		ok := false
		if err := json.Unmarshal(enc, &rd); err != nil {
			sd.Detail = fmt.Sprintf("cannot decode rank %d's structure: %v", ref, err)
		} else {
			sd.Key, sd.Detail, ok = diffRanks(mine, cl.rank, rd, ref)
		}
		if !ok {
			b, _ := json.Marshal(sd)
			if len(b) > diffSlot-8 {
				b, _ = json.Marshal(slotDiff{Detail: clipText(sd.Detail, diffSlot/2)})
			}
			binary.LittleEndian.PutUint64(slot, uint64(len(b)))
			copy(slot[8:], b)
		}
	}
	all := make([]byte, diffSlot*cl.size)
	if err := xfer.Allgather(cl.Step, slot, all); err != nil {
		return cl.errorf("structures differ; gathering differences: %w", err)
	}
	for r := range cl.size {
		s := all[r*diffSlot : (r+1)*diffSlot]
		m := binary.LittleEndian.Uint64(s)
		if m == 0 {
			continue
		}
		var sd slotDiff
		if m > diffSlot-8 || json.Unmarshal(s[8:8+m], &sd) != nil {
			sd.Detail = "(undecodable difference)"
		}
		return cl.errorf("%w", &StructureError{Op: cl.op, Ref: ref, Rank: r, Key: sd.Key, Detail: sd.Detail})
	}
	// The hashes differed but no rank found a difference: the descriptions
	// are equal yet hash differently, which cannot happen with one build.
	return cl.errorf("structure hashes differ between ranks but their descriptions match (different tdmpi versions?)")
}

// truncate returns s cut to at most n bytes.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// AllGather, Scatter and GatherAndStack move one block per rank. A block is
// a TensorDict's consolidated storage followed by its tensorclass name and
// its consolidated metadata (JSON), padded to a multiple of 8 bytes. The
// storage of a consolidated layout is itself a multiple of 8 bytes, so
// blocks are counted in 8-byte words: the MPI calls move uint64 elements,
// and every storage lands 8-byte aligned, ready for typed views.
//
// Before the blocks move, the ranks exchange each block's sizes (infoLen
// int64 values), check them against their limits and agree that every
// rank is ready.

// infoLen is the number of int64 values describing a block: failed (0 or
// 1), class name length, metadata length, storage length.
const infoLen = 4

// block is this rank's TensorDict, laid out but not yet packed.
type block struct {
	p     *plan // the layout of the TensorDict's leaves
	class string
	meta  []byte
	total int
}

// prepareBlock lays td out, or takes the layout its plan keeps
// (blockLayout), and returns td's plan too (nil for a nil td), which
// GatherAndStack checks the structure with. It returns an error (without
// the op prefix) if td cannot be sent.
func (cl *collCall) prepareBlock(td *TensorDict) (block, *leafPlan, error) {
	if td == nil {
		return block{}, nil, fmt.Errorf("nil tensordict")
	}
	p := leafPlanOf(td)
	if err := cl.ready(); err != nil {
		return block{}, p, err
	}
	if b, ok, err := p.blockLayout(); ok {
		return b, p, err
	}
	b, err := layBlock(td)
	return b, p, err
}

// layBlock lays td out as a block: its leaves' layout, class name and
// metadata.
func layBlock(td *TensorDict) (block, error) {
	p, err := makePlan("Layout", td, 0, false)
	if err != nil {
		return block{}, err
	}
	meta, err := p.appendMetadata(nil)
	if err != nil {
		return block{}, err
	}
	return block{p: p, class: td.ClassName(), meta: meta, total: p.total}, nil
}

// info returns b's sizes, or a failed info if err is not nil.
func (b block) info(err error) [infoLen]int64 {
	if err != nil {
		return [infoLen]int64{1, 0, 0, 0}
	}
	return [infoLen]int64{0, int64(len(b.class)), int64(len(b.meta)), int64(b.total)}
}

// blockWords returns the number of 8-byte words of the block info in
// describes. Valid infos (checkInfo) cannot overflow.
func blockWords(in []int64) int {
	return int((in[1] + in[2] + in[3] + 7) / 8)
}

// checkInfo validates the sizes rank r announced against the limits.
func (cl *collCall) checkInfo(r int, in []int64) error {
	h := wire.Header{Kind: wire.KindGather, Flags: wire.FlagConsolidated, Total: in[3], MetaLen: in[2], Chunk: wire.MaxChunk}
	if in[1] < 0 || in[1] > math.MaxInt32 {
		return fmt.Errorf("rank %d announced a class name of %d bytes", r, in[1])
	}
	h.ClassLen = int(in[1])
	if err := h.Check(cl.lim); err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	if in[3]%8 != 0 {
		return fmt.Errorf("rank %d announced a storage of %d bytes, not a multiple of 8", r, in[3])
	}
	return nil
}

// layoutBlocks checks the infos of ranks (nil for all) and returns each
// rank's offset and count in words in one buffer holding all of them
// (ranks left out get count 0), and the buffer's length in words. The sum
// of the storages must stay within the MaxTotal limit, and the buffer
// within what one MPI call can address.
func (cl *collCall) layoutBlocks(infos []int64, include func(r int) bool) (displs, counts []int, words int, err error) {
	displs, counts = make([]int, cl.size), make([]int, cl.size)
	var sum int64
	for r := range cl.size {
		in := infos[r*infoLen : (r+1)*infoLen]
		if include != nil && !include(r) {
			continue
		}
		if err := cl.checkInfo(r, in); err != nil {
			return nil, nil, 0, err
		}
		sum += in[3]
		if sum > cl.lim.MaxTotal {
			return nil, nil, 0, &wire.LimitError{Field: "total of the storages", Value: sum, Limit: cl.lim.MaxTotal}
		}
		displs[r], counts[r] = words, blockWords(in)
		words += counts[r]
		if words > math.MaxInt32 {
			return nil, nil, 0, fmt.Errorf("blocks of %d bytes and more exceed what one MPI call can move (%d bytes)", int64(words)*8, int64(math.MaxInt32)*8)
		}
	}
	return displs, counts, words, mem.CheckAvailable(int64(words) * 8)
}

// pack writes b into dst, which has exactly b's words.
func (b block) pack(dst []uint64) error {
	buf := wordsAsBytes(dst)
	if err := pack(buf[:b.total], b.p, true); err != nil {
		return fmt.Errorf("packing the leaves: %w", err)
	}
	n := b.total + copy(buf[b.total:], b.class)
	n += copy(buf[n:], b.meta)
	clear(buf[n:])
	return nil
}

// unpack rebuilds the TensorDict rank r sent from its block words, which
// must hold the block described by in. The result's storage views words.
func (cl *collCall) unpack(r int, in []int64, words []uint64) (*TensorDict, error) {
	buf := wordsAsBytes(words)
	total, cls, meta := int(in[3]), int(in[1]), int(in[2])
	if len(buf) < total+cls+meta {
		return nil, cl.errorf("rank %d: block of %d bytes, need %d", r, len(buf), total+cls+meta)
	}
	// The words are the receive pool's (recvWords), and the region holds
	// every rank's block: the storage is only a part of it (the class name
	// and metadata follow), which mem.GiveBack never takes back, so its
	// release leaves the region to the collector.
	st := reusableStorage(buf[:total:total])
	class := string(buf[total : total+cls])
	return cl.rebuild(r, st, buf[total+cls:total+cls+meta:total+cls+meta], class)
}

// recvWords returns n words for the blocks a collective receives, from the
// receive pool (see "Communication and memory" in the package
// documentation) and not cleared: the caller has every word written (by
// MPI and pack) before anything reads the blocks, and drops the words
// unread if that fails.
func recvWords(n int) ([]uint64, error) {
	b, err := mem.Recv(8 * n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// wordBytes views w as bytes.
func wordsAsBytes(w []uint64) []byte {
	if len(w) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 8*len(w))
}

// firstFailed returns the lowest rank whose info says it failed, or size.
func (cl *collCall) firstFailed(infos []int64) int {
	for r := range cl.size {
		if infos[r*infoLen] != 0 {
			return r
		}
	}
	return cl.size
}
