package tensordict

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/coll"
)

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
