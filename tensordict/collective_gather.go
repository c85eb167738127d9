package tensordict

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/xfer"
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
	mine := b.Info(local)
	infos := make([]int64, coll.InfoLen*cl.Size)
	if err := xfer.Allgather(cl.Step, mine[:], infos); err != nil {
		return cl.Errorf("gathering sizes: %w", err)
	}
	if r := cl.FirstFailed(infos); r < cl.Size {
		return cl.Spread(r, local)
	}
	displs, counts, words, lerr := cl.LayoutBlocks(infos, nil)
	var buf []uint64
	if lerr == nil {
		if buf, lerr = coll.RecvWords(words); lerr == nil {
			lerr = b.pack(buf[displs[cl.Rank] : displs[cl.Rank]+counts[cl.Rank]])
		}
	}
	if err := cl.ShareFailure(lerr); err != nil {
		return err
	}
	cl.Defer() // IAllGather: the blocks are left to Wait
	if err := xfer.Allgatherv(cl.Step, buf, counts, displs); err != nil {
		return cl.Errorf("gathering blocks: %w", err)
	}
	if *out == nil {
		*out = make([]*TensorDict, cl.Size)
	}
	res := *out
	return cl.Then(func() error {
		for r := range cl.Size {
			td, err := unpack(cl, r, infos[r*coll.InfoLen:(r+1)*coll.InfoLen], buf[displs[r]:displs[r]+counts[r]])
			if err != nil {
				return err
			}
			res[r] = td
		}
		return nil
	})
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
		if err := cl.CheckRoot("dst", dst); err != nil {
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
		mine := b.Info(nil)
		var infos []int64
		if cl.Rank == dst {
			infos = make([]int64, coll.InfoLen*cl.Size)
		}
		// Every rank but dst packs its block before sending the sizes, so
		// that a failure to pack is caught by the agreement below.
		var own []uint64
		var lerr error
		if cl.Rank != dst {
			own = make([]uint64, coll.Words(mine[:]))
			lerr = b.pack(own)
		}
		if err := xfer.Gather(cl.Step, mine[:], infos, dst); err != nil {
			return cl.Errorf("gathering sizes: %w", err)
		}
		var displs, counts []int
		var buf []uint64
		if cl.Rank == dst {
			var words int
			displs, counts, words, lerr = cl.LayoutBlocks(infos, nil)
			if lerr == nil {
				if buf, lerr = coll.RecvWords(words); lerr == nil {
					lerr = b.pack(buf[displs[dst] : displs[dst]+counts[dst]])
				}
			}
		}
		if err := cl.ShareFailure(lerr); err != nil {
			return err
		}
		blk := own // dst's block is packed in buf already
		if cl.Rank == dst {
			blk = buf
		}
		if err := xfer.Gatherv(cl.Step, blk, counts, displs, dst); err != nil {
			return cl.Errorf("gathering blocks: %w", err)
		}
		if cl.Rank != dst {
			return nil
		}
		tds := make([]*TensorDict, cl.Size)
		for r := range cl.Size {
			td, err := unpack(cl, r, infos[r*coll.InfoLen:(r+1)*coll.InfoLen], buf[displs[r]:displs[r]+counts[r]])
			if err != nil {
				return err
			}
			tds[r] = td
		}
		st, err := Stack(tds, 0)
		if err != nil {
			return cl.Wrap(err)
		}
		out = st
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
		if err := cl.CheckRoot("src", src); err != nil {
			return err
		}
		var local error
		var infos []int64
		var send, own []uint64
		var displs, counts []int
		if cl.Rank == src {
			infos, send, own, displs, counts, local = scatterPack(cl, src, tds)
		}
		mine := make([]int64, coll.InfoLen)
		if err := xfer.Scatter(cl.Step, infos, mine, src); err != nil {
			return cl.Errorf("scattering sizes: %w", err)
		}
		if mine[0] != 0 {
			return cl.Spread(src, local)
		}
		var recv []uint64
		var lerr error
		if cl.Rank != src {
			if lerr = cl.CheckInfo(src, mine); lerr == nil {
				lerr = cl.Ready()
			}
			if lerr == nil {
				recv, lerr = coll.RecvWords(coll.Words(mine))
			}
		} else {
			lerr = cl.Ready()
		}
		if err := cl.ShareFailure(lerr); err != nil {
			return err
		}
		blk := recv // src keeps its own block
		if cl.Rank == src {
			blk = send
		}
		if err := xfer.Scatterv(cl.Step, blk, counts, displs, src); err != nil {
			return cl.Errorf("scattering blocks: %w", err)
		}
		if cl.Rank == src {
			recv = own
		}
		td, err := unpack(cl, src, mine, recv)
		if err != nil {
			return err
		}
		out = td
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scatterPack lays out and packs tds on the source rank: the sizes of each
// rank's block (marked failed for every rank if something is wrong), the
// send buffer with every other rank's block, src's own block apart, and
// the send buffer's displacements and counts in words.
func scatterPack(cl *coll.Call, src int, tds []*TensorDict) (infos []int64, send, own []uint64, displs, counts []int, err error) {
	infos = make([]int64, coll.InfoLen*cl.Size)
	fail := func(err error) ([]int64, []uint64, []uint64, []int, []int, error) {
		for r := range cl.Size {
			infos[r*coll.InfoLen] = 1
		}
		return infos, nil, nil, nil, nil, err
	}
	if len(tds) != cl.Size {
		return fail(fmt.Errorf("%d tensordicts for %d ranks", len(tds), cl.Size))
	}
	blocks := make([]block, cl.Size)
	for r, td := range tds {
		b, _, err := prepareBlock(cl, td)
		if err != nil {
			return fail(fmt.Errorf("tensordict %d: %w", r, err))
		}
		blocks[r] = b
		in := b.Info(nil)
		copy(infos[r*coll.InfoLen:], in[:])
	}
	// Check the source's own sizes as receivers will: a block the
	// receivers must refuse is refused here, before anything moves.
	displs, counts, words, err := cl.LayoutBlocks(infos, func(r int) bool { return r != src })
	if err != nil {
		return fail(err)
	}
	if err := cl.CheckInfo(src, infos[src*coll.InfoLen:(src+1)*coll.InfoLen]); err != nil {
		return fail(err)
	}
	send = make([]uint64, words)
	if own, err = coll.RecvWords(coll.Words(infos[src*coll.InfoLen : (src+1)*coll.InfoLen])); err != nil {
		return fail(err)
	}
	for r, b := range blocks {
		dst := own
		if r != src {
			dst = send[displs[r] : displs[r]+counts[r]]
		}
		if err := b.pack(dst); err != nil {
			return fail(fmt.Errorf("tensordict %d: %w", r, err))
		}
	}
	return infos, send, own, displs, counts, nil
}
