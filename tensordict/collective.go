package tensordict

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// The collective operations (Broadcast, AllReduce, Reduce, AllGather,
// Scatter, GatherAndStack) walk the TensorDict and hand its leaves and
// bytes to package internal/coll, which runs their steps (see there).

// collErrors makes the errors of this package's API for internal/coll.
var collErrors = coll.Errors{
	Peer: func(op string, rank int, msg string) error { return &PeerError{Op: op, Rank: rank, Msg: msg} },
	Structure: func(op string, ref, rank int, key []string, detail string) error {
		return &StructureError{Op: op, Ref: ref, Rank: rank, Key: Key(key), Detail: detail}
	},
}

// runCollective checks the resolved options o, takes the group's protocol
// lock and runs f, then the closing step (closeCollective). It logs the
// start (with root, unless negative, and bytes(rank), when bytes is not
// nil and the line is written) and any error.
func runCollective(op string, root int, bytes func(rank int) int64, o remoteOptions, f func(cl *coll.Call) error) error {
	_, err := startCollective(op, root, bytes, o, false, f)
	return err
}

// startCollective is runCollective and, with deferSteps, its asynchronous
// form (see coll.Start).
func startCollective(op string, root int, bytes func(rank int) int64, o remoteOptions, deferSteps bool, f func(cl *coll.Call) error) (*coll.Pending, error) {
	if err := o.check(op); err != nil {
		return nil, xfer.LogFailed(op, err)
	}
	cl := &coll.Call{Op: op, Lim: o.limits(), Consolidated: o.consolidated, DeferSteps: deferSteps, Errors: &collErrors}
	return coll.Start(o.ctx, o.group, cl, root, bytes, f)
}

// runCollectiveAsync is runCollective for a collective whose f defers its
// steps (see coll.Start), returning a Pending that completes them.
func runCollectiveAsync(op string, root int, bytes func(rank int) int64, o remoteOptions, f func(cl *coll.Call) error) (*Pending, error) {
	p, err := startCollective(op, root, bytes, o, true, f)
	if err != nil {
		return nil, err
	}
	return &Pending{c: p}, nil
}

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
// in sorted order and the structure hash the ranks compare (structure);
// for a reduction, its coll.Reduction (reduceLayout); for those that send
// a TensorDict as a block (AllGather, GatherAndStack, Scatter), its layout
// and metadata (blockLayout). The TensorDict's transfer state keeps its
// plan for the next call (p2pState.coll) and drops it when it is rebuilt,
// so the plan follows the state's rule: the same while no node of the
// tree was edited and every non-tensor value is a scalar. What can change
// behind the edit counts, a storage released or a mapped file truncated,
// is checked on every call (coll.Reduction.Check; the block's pack).
// Sorting, hashing and checking the leaves on every call took about half
// of an AllReduce of 256 leaves of 64 bytes (87-95 us, np 2, where raw
// MPI reduces the bytes in 7-13); encoding the metadata and laying the
// TensorDict out, 41% of Scatter's source with 256 leaves.
//
// A plan's parts are written once each (sync.Once); while its state keeps
// it, a plan keeps the tensors it was made of alive.
type leafPlan struct {
	td *TensorDict
	// plain: every non-tensor value of the tree is a scalar (plainValues),
	// so that its metadata changes only with an edit.
	plain bool

	structOnce sync.Once
	leaves     []Item // sorted depth-first key order (sortedLeaves)
	hash       uint64 // structureHash

	// A reduction's layout (reduceLayout).
	reduceOnce sync.Once
	red        *coll.Reduction

	// The TensorDict laid out as a block (blockLayout), for a plain one,
	// kept from its second call on.
	blockCalls atomic.Int32
	blockOnce  sync.Once
	block      block
	blockErr   error
}

// leafPlanOf returns td's plan: the one td's transfer state keeps, made
// there first if it has none. When another call holds the state, or the
// state cannot describe td (see p2pStateOf), it returns a plan for this
// call alone.
func leafPlanOf(td *TensorDict) *leafPlan {
	s, locked, err := tryP2PStateOf("collective", td)
	if !locked || err != nil { // refresh has unlocked s on error
		return &leafPlan{td: td, plain: plainValues(td)}
	}
	defer s.mu.Unlock()
	if s.coll == nil {
		s.coll = &leafPlan{td: td, plain: s.plain}
	}
	return s.coll
}

// structure works out p's sorted leaves and structure hash on its first
// call, and returns p.
func (p *leafPlan) structure() *leafPlan {
	p.structOnce.Do(func() {
		td := p.td
		p.leaves = sortedLeaves(td)
		p.hash = structureHash(td, p.leaves)
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
		ts := make([]*tensor.Tensor, len(p.leaves))
		for i, it := range p.leaves {
			ts[i] = it.Tensor
		}
		p.red = coll.PlanReduction(ts, func(i int) any { return p.leaves[i].Key })
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
		b, err = layBlock(p.td)
		return b, true, err
	}
	p.blockOnce.Do(func() { p.block, p.blockErr = layBlock(p.td) })
	return p.block, true, p.blockErr
}

// describe returns the structure of p's TensorDict (none for a nil p):
// what the ranks exchange to explain a mismatch.
func (p *leafPlan) describe() codec.Structure {
	if p == nil {
		return codec.Structure{}
	}
	d := codec.Structure{Batch: p.td.BatchSize(), Leaves: make([]codec.StructLeaf, len(p.leaves))}
	for i, it := range p.leaves {
		d.Leaves[i] = codec.StructLeaf{Key: codec.Key(it.Key), DType: it.Tensor.DType(), Shape: it.Tensor.Shape()}
	}
	return d
}

// structureHash returns the structure hash of td, given its sorted leaves:
// the batch size, and each leaf's key, dtype and shape, in sorted order. It
// is what the ranks compare before a reduction; describe, which
// explains a difference, is only built when the hashes differ.
func structureHash(td *TensorDict, leaves []Item) uint64 {
	h := codec.NewHasher(codec.SortedOrder, td.batch, len(leaves))
	for _, it := range leaves {
		h.TensorLeaf(it.Key[:len(it.Key)-1], it.Key[len(it.Key)-1], it.Tensor)
	}
	return h.Sum64()
}

// block is this rank's TensorDict laid out as a block (see coll.Block):
// the layout of its leaves, which pack writes.
type block struct {
	coll.Block
	p *plan
}

// prepareBlock lays td out, or takes the layout its plan keeps
// (blockLayout), and returns td's plan too (nil for a nil td), which
// GatherAndStack checks the structure with. It returns an error (without
// the op prefix) if td cannot be sent.
func prepareBlock(cl *coll.Call, td *TensorDict) (block, *leafPlan, error) {
	if td == nil {
		return block{}, nil, fmt.Errorf("nil tensordict")
	}
	p := leafPlanOf(td)
	if err := cl.Ready(); err != nil {
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
	return block{coll.Block{Class: td.ClassName(), Meta: meta, Total: p.total}, p}, nil
}

// pack writes b's leaves into storage, its bytes in the block.
func (b block) pack(storage []byte) error { return pack(storage, b.p, true) }

// unpack rebuilds the TensorDict rank r sent from its block words, which
// must hold the block described by in. The result's storage views words.
func unpack(cl *coll.Call, r int, in []int64, words []uint64) (*TensorDict, error) {
	storage, class, meta, err := cl.Unblock(r, in, words)
	if err != nil {
		return nil, err
	}
	// The words are the receive pool's (coll.RecvWords), and the region
	// holds every rank's block: the storage is only a part of it (the class
	// name and metadata follow), which mem.GiveBack never takes back, so its
	// release leaves the region to the collector.
	td, err := rebuild(cl, r, reusableStorage(storage), nil, meta, class)
	return td, cl.Wrap(err)
}
