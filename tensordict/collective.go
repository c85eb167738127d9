package tensordict

import (
	"errors"
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

// AllReduce combines the tensor leaves of td across every rank of the group
// with op, in place: afterwards every rank's leaf holds the element-wise
// sum (product, minimum, maximum) of all ranks' leaves, like tensordict's
// all_reduce. Every rank of the group calls it.
//
// The ranks must hold TensorDicts of the same structure: the same batch
// size and the same tensor leaves (keys, dtypes, shapes), in any insertion
// order: leaves are matched by key, in sorted depth-first key order.
// Non-tensor values are left alone. The structure is checked first, by
// comparing a hash of it across the ranks; if it differs, every rank
// returns a *StructureError naming the first differing key, and no leaf is
// changed.
//
// When every leaf is of one dtype and the leaves tile one storage in the
// same layout on every rank (a TensorDict returned by Consolidate,
// FromRemoteInit or Broadcast, say), the whole storage is reduced in one
// MPI call. Otherwise leaves are taken dtype by dtype, in sorted key order
// within a dtype: leaves of 256 KiB and more are reduced in place one call
// each, smaller ones are copied into buckets of up to 4 MiB, one call per
// bucket. Either way every rank makes the same calls, whatever its
// insertion order. A TensorDict reduced again and again, such as a model's
// gradients, is fastest consolidated once and then updated in place
// through its leaves: one call over a storage on huge pages (np 2 on this
// project's VM, 16 leaves and 4-8 MiB in all: 0.69-0.73x one raw
// MPI_Allreduce of heap memory, against 1.9-2.0x with each leaf in a heap
// storage of its own). Leaves that are not contiguous are reduced through a
// copy and written back; a leaf that repeats elements (an Expand result)
// is refused. Nested TensorDicts use the same group (Python tensordict's
// reduce falls back to the default group there).
//
// An AllReduce (or Reduce) repeated with the same structure, op and
// layout skips the agreement that starts a call and the one that closes
// it: when the group's last reduction agreed on the same, the ranks
// exchange a signature of what was agreed instead, and a rank whose call
// differs flags it there; every rank then takes the full steps, which
// report the difference as above. Leaves of one dtype (not half precision
// or complex) and at most 240 bytes in all travel with the signature: one
// step in all (np 2, 16 leaves of 8-128 bytes: 2.1-2.5 us against
// 3.5-4.2; 512 bytes to 64 KiB: 0.82-0.94x the time).
//
// See ReduceOp for the dtypes each operation accepts. Options: WithGroup,
// WithContext (checked before the reduction starts; MPI cannot cancel it
// once under way).
func (td *TensorDict) AllReduce(op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("AllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, -1, nil)
	})
}

// Reduce combines the tensor leaves of td across every rank of the group
// with op into dst's td, in place, like tensordict's reduce. The other
// ranks' TensorDicts are only read. dst is a rank of the group; every rank
// passes the same dst. The structure check, the order and the options are
// those of AllReduce; the structure of dst is the reference its errors
// compare with.
func (td *TensorDict) Reduce(dst int, op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("Reduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, dst, cl.RootRange("dst", dst))
	})
}

// IAllReduce starts AllReduce and returns a Pending that completes it, like
// tensordict's all_reduce(async_op=True): the reduction goes on in MPI while
// the caller computes. Every rank of the group calls it, in the same order
// as its other collectives on the group.
//
// IAllReduce returns once the ranks have agreed (the structure, op and
// dtype checks of AllReduce, which need every rank to have called it): an
// error found there is returned by IAllReduce on every rank, and nothing is
// reduced. It then posts every reduction step as a nonblocking MPI
// collective (one for a consolidated storage, else one per large leaf or
// bucket of small ones) and returns. Until Wait (or a Test that reports
// completion) returns, td's tensors must be neither read nor written: the
// results, and for leaves that are not contiguous, of half precision or in
// buckets, their copy back into td, arrive only then, as does ReduceAvg's
// division. Wait is bounded by the context of WithContext as AllReduce's
// steps are (a step given up breaks the group). Several IAllReduce and
// IReduce calls may be in flight on one group at once; other collectives on
// the group may run meanwhile. A Pending dropped without Wait leaves its
// steps to MPI (see mpi.Request) and td without the results.
//
// Options: those of AllReduce.
func (td *TensorDict) IAllReduce(op ReduceOp, opts ...CollectiveOption) (*Pending, error) {
	return runCollectiveAsync("IAllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, -1, nil)
	})
}

// IReduce starts Reduce into rank dst's td and returns a Pending that
// completes it, like tensordict's reduce(async_op=True,
// return_premature=True). Its rules are those of IAllReduce; on the ranks
// other than dst, td is only read, and must not be written until Wait.
func (td *TensorDict) IReduce(dst int, op ReduceOp, opts ...CollectiveOption) (*Pending, error) {
	return runCollectiveAsync("IReduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, dst, cl.RootRange("dst", dst))
	})
}

// reduce runs AllReduce (root -1) or Reduce (to root). badRoot is the
// error of a root out of the group's range: this rank's failure in the
// agreement, on some ranks or all, so that no rank is left waiting for
// the others.
func reduce(cl *coll.Call, td *TensorDict, op ReduceOp, root int, badRoot error) error {
	var p *leafPlan
	local := cl.Ready()
	if badRoot != nil {
		local, root = badRoot, 0
	}
	if td == nil {
		local = errors.New("nil tensordict")
	} else {
		p = leafPlanOf(td).reduceLayout()
	}
	if local == nil {
		local = p.red.Check(coll.Op(op))
	}
	if local == nil {
		local = p.red.Hold(&cl.Held) // MPI reduces them in place
	}
	var red *coll.Reduction
	var hash uint64
	if p != nil {
		red, hash = p.red, p.hash
	}
	return cl.Reduce(red, coll.Op(op), root, local, hash, p.describe)
}

// ReduceOp is the element-wise operation AllReduce and Reduce combine the
// ranks' leaves with, like torch.distributed.ReduceOp.
//
// Sum and Prod apply to every dtype; Min and Max to every dtype but the
// complex ones. On bool leaves Sum and Max are a logical or, Prod and Min a
// logical and, as torch does. Float16 and BFloat16 have no MPI datatype:
// their leaves are widened to float32, reduced (for ReduceAvg, divided by
// the group's size and then summed) in float32, and rounded back to the
// nearest half value once, at the end (so a sum is at least as accurate as
// torch's, which accumulates in half precision, and a mean that fits in
// half precision is never lost to a sum that overflows).
type ReduceOp int

// The reduction operations. The zero value is ReduceSum, tensordict's
// default (op=None).
//
// ReduceAvg is the sum divided by the group's size, on floating-point and
// complex leaves only (an integer or bool leaf is refused on every rank
// before anything moves: torch's integer division would truncate, and
// tdmpi does not guess). Float16 and bfloat16 leaves are divided before
// the sum, in float32, and rounded once: the mean of 60000 and 60000 in
// float16 is 60000, not the +Inf of a sum rounded first, and that of 3e38
// and 3e38 in bfloat16 is 3e38. Other leaves are summed, then divided;
// with Reduce, only the destination divides them. ReduceBitAnd, ReduceBitOr and ReduceBitXor are bitwise on
// integer leaves and logical on bool leaves, as torch's BAND, BOR and BXOR;
// a floating-point leaf is refused on every rank.
const (
	ReduceSum    ReduceOp = iota // element-wise sum
	ReduceProd                   // element-wise product
	ReduceMin                    // element-wise minimum
	ReduceMax                    // element-wise maximum
	ReduceAvg                    // element-wise mean over the ranks
	ReduceBitAnd                 // bitwise (bool: logical) and
	ReduceBitOr                  // bitwise (bool: logical) or
	ReduceBitXor                 // bitwise (bool: logical) exclusive or
)

// String returns the name of o: "sum", "prod", "min", "max", "avg",
// "band", "bor" or "bxor".
func (o ReduceOp) String() string { return coll.Op(o).String() }

// AllGather collects every rank's td on every rank, like tensordict's
// all_gather: it returns one TensorDict per rank of the group, in rank
// order, this rank's own included (rebuilt from the gathered copy, like the
// others). The ranks' TensorDicts may differ in structure and size. Every
// rank of the group calls it.
//
// Each rank lays its td out as a consolidated block (storage, class name,
// metadata); the ranks exchange the blocks' sizes, check them against their
// limits (WithMaxBytes bounds the sum of the storages), and gather the
// blocks with one MPI_Allgatherv, without padding. Every result is
// consolidated, its leaves views into the one gathered buffer: nothing is
// copied after the transfer.
//
// Options: WithGroup, WithContext (checked before the blocks move),
// WithMaxBytes.
func (td *TensorDict) AllGather(opts ...CollectiveOption) ([]*TensorDict, error) {
	var out []*TensorDict
	err := runCollective("AllGather", -1, td.logBytes, resolve(opts, usesCollRecv), func(cl *coll.Call) error {
		return td.allGather(cl, &out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IAllGather starts AllGather and returns a Pending that completes it: the
// blocks move in MPI while the caller computes, and once Wait (or a Test
// that reports completion) returns nil, out[r] is rank r's TensorDict. out
// must have one element per rank of the group (a different length is an
// error on every rank). IAllGather returns once the ranks have exchanged
// their sizes and agreed, as AllGather's do (an error there is returned
// at once, on every rank); td's tensors must not be written until Wait.
// Options: those of AllGather.
func (td *TensorDict) IAllGather(out []*TensorDict, opts ...CollectiveOption) (*Pending, error) {
	if out == nil {
		out = []*TensorDict{} // of the wrong length: refused on every rank
	}
	return runCollectiveAsync("IAllGather", -1, td.logBytes, resolve(opts, usesCollRecv), func(cl *coll.Call) error {
		return td.allGather(cl, &out)
	})
}

// allGather is the body of AllGather and IAllGather. *out is the result:
// nil for AllGather, which allocates it, else the caller's slice.
func (td *TensorDict) allGather(cl *coll.Call, out *[]*TensorDict) error {
	b, _, local := prepareBlock(cl, td)
	if local == nil && *out != nil && len(*out) != cl.Size {
		local = fmt.Errorf("IAllGather: out has %d elements, want one per rank (%d)", len(*out), cl.Size)
	}
	g, err := cl.GatherBlocks(b.Block, b.pack, local, -1)
	if err != nil {
		return err
	}
	if *out == nil {
		*out = make([]*TensorDict, cl.Size)
	}
	res := *out
	return cl.Then(func() error { return unpackAll(cl, g, res) })
}

// unpackAll rebuilds into out every rank's TensorDict from the blocks g
// holds.
func unpackAll(cl *coll.Call, g coll.Gathered, out []*TensorDict) error {
	for r := range out {
		in, words := g.Block(r)
		td, err := unpack(cl, r, in, words)
		if err != nil {
			return err
		}
		out[r] = td
	}
	return nil
}

// GatherAndStack collects every rank's td on rank dst and stacks them
// along a new leading batch dimension, in rank order: on dst it returns a
// TensorDict of batch size [Size, td's batch size...] whose entry i comes
// from rank i; on the other ranks it returns nil. Every rank of the group
// calls it.
//
// This departs from tensordict's gather_and_stack, which needs dst's own
// TensorDict to have leading dimension Size-1 already and overwrites it in
// place with the stack of the other ranks' (and pickles whole
// TensorDicts). Here td is left alone on every rank and the result is new;
// GatherAndStackInPlace has Python's semantics.
//
// The ranks' TensorDicts must have the same structure (batch size, keys,
// dtypes, shapes); it is checked first, as AllReduce does, and a mismatch
// makes every rank return a *StructureError naming the first differing
// key. Non-tensor values that differ between ranks become a
// NonTensorStack, one value per rank, as Stack makes them (values equal on
// every rank stay one value). Options: WithGroup, WithContext, WithMaxBytes.
func (td *TensorDict) GatherAndStack(dst int, opts ...CollectiveOption) (*TensorDict, error) {
	var out *TensorDict
	err := runCollective("GatherAndStack", dst, td.logBytes, resolve(opts, usesCollRecv), func(cl *coll.Call) error {
		if err := cl.CheckRoot("dst", dst, nil); err != nil {
			return err
		}
		b, p, local := prepareBlock(cl, td)
		var hash uint64
		if p != nil {
			hash = p.structure().hash
		}
		if _, err := cl.CheckSame(hash, p.describe, dst, local); err != nil {
			return err
		}
		g, err := cl.GatherBlocks(b.Block, b.pack, nil, dst)
		if g.Empty() || err != nil {
			return err
		}
		tds := make([]*TensorDict, cl.Size)
		if err := unpackAll(cl, g, tds); err != nil {
			return err
		}
		if out, err = Stack(tds, 0); err != nil {
			return cl.Wrap(err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GatherAndStackInPlace is tensordict's gather_and_stack: rank dst receives
// the stack of every other rank's td into its own td, in place, and the
// other ranks' td is only read. On dst, td must have leading batch
// dimension Size-1, each entry of the structure the other ranks send: entry
// i holds rank i's td for i < dst and rank i+1's for i >= dst (dst's own
// is not part of it, as in Python). The leaves are written through
// whatever storage they have (a memory-mapped td writes to its files);
// non-tensor values are left alone. Every rank of the group calls it; a td
// on dst of the wrong shape, or structures that differ, make every rank
// return an error, and nothing is written. Options: those of
// GatherAndStack.
func (td *TensorDict) GatherAndStackInPlace(dst int, opts ...CollectiveOption) error {
	const op = "GatherAndStackInPlace"
	o := resolve(opts, usesCollRecv)
	if o.group == nil || o.err != nil {
		_, err := td.GatherAndStack(dst, opts...) // reports the options' error
		return err
	}
	g := o.group
	mine, shapeErr := td, error(nil)
	if g.Rank() == dst {
		// dst contributes a view of its first entry, so that the ranks'
		// structures compare as GatherAndStack's do; its data is ignored.
		switch b := td.BatchSize(); {
		case td == nil:
			shapeErr = errors.New("nil tensordict")
		case len(b) == 0 || b[0] != g.Size()-1:
			shapeErr = fmt.Errorf("td on rank %d has batch size %v, want leading dimension %d (one entry per other rank)", dst, b, g.Size()-1)
		case b[0] == 0:
			return nil // a group of one: nothing to gather
		}
		mine = nil
		if shapeErr == nil {
			mine, shapeErr = td.Index(0)
		}
	}
	stacked, err := mine.GatherAndStack(dst, opts...)
	if err != nil {
		if shapeErr != nil {
			return fmt.Errorf("tensordict: %s: rank %d of %d: %w", op, g.Rank(), g.Size(), shapeErr)
		}
		return err
	}
	if g.Rank() != dst {
		return nil
	}
	for i := range g.Size() - 1 {
		r := i
		if i >= dst {
			r = i + 1
		}
		from, err := stacked.Index(r)
		if err == nil {
			var to *TensorDict
			if to, err = td.Index(i); err == nil {
				err = to.CopyFrom(from)
			}
		}
		if err != nil {
			return fmt.Errorf("tensordict: %s: rank %d of %d: entry %d (from rank %d): %w", op, g.Rank(), g.Size(), i, r, err)
		}
	}
	return nil
}

// Scatter sends tds[i] from rank src to rank i of the group, like
// tensordict's scatter: every rank calls it and returns its own
// TensorDict, consolidated. On src, tds has one TensorDict per rank (they
// may differ in structure and size); elsewhere tds is ignored, and so is
// the receiver td on every rank (it may be nil).
//
// src lays every TensorDict out as a consolidated block (storage, class
// name, metadata) in one buffer, scatters each block's sizes, and, once
// every rank has checked its sizes against its limits (WithMaxBytes) and
// allocated, the blocks with one MPI_Scatterv. src's own result is packed
// apart, so it does not keep the other ranks' blocks alive.
//
// Options: WithGroup, WithContext (checked before the blocks move),
// WithMaxBytes.
func (td *TensorDict) Scatter(src int, tds []*TensorDict, opts ...CollectiveOption) (*TensorDict, error) {
	var out *TensorDict
	err := runCollective("Scatter", src, func(r int) int64 {
		if r != src {
			return -1
		}
		var n int64
		for _, x := range tds {
			n += max(tensorBytes(x), 0)
		}
		return n
	}, resolve(opts, usesCollRecv), func(cl *coll.Call) error {
		if err := cl.CheckRoot("src", src, nil); err != nil {
			return err
		}
		var blocks []coll.Block
		var plans []*plan
		var local error
		if cl.Rank == src {
			blocks, plans, local = scatterBlocks(cl, tds)
		}
		in, words, err := cl.ScatterBlocks(src, blocks, func(r int, st []byte) error { return pack(st, plans[r], true) }, local)
		if err != nil {
			return err
		}
		out, err = unpack(cl, src, in, words)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scatterBlocks lays tds out as blocks on the source of a Scatter, one
// per rank, or returns why it cannot.
func scatterBlocks(cl *coll.Call, tds []*TensorDict) ([]coll.Block, []*plan, error) {
	if len(tds) != cl.Size {
		return nil, nil, fmt.Errorf("%d tensordicts for %d ranks", len(tds), cl.Size)
	}
	blocks, plans := make([]coll.Block, cl.Size), make([]*plan, cl.Size)
	for r, td := range tds {
		b, _, err := prepareBlock(cl, td)
		if err != nil {
			return nil, nil, fmt.Errorf("tensordict %d: %w", r, err)
		}
		blocks[r], plans[r] = b.Block, b.p
	}
	return blocks, plans, nil
}
