package tensordict

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/xfer"
)

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
	}, resolve(opts, usesCollRecv), func(cl *coll) error {
		if err := cl.checkRoot("src", src); err != nil {
			return err
		}
		var local error
		var infos []int64
		var send, own []uint64
		var displs, counts []int
		if cl.rank == src {
			infos, send, own, displs, counts, local = cl.scatterPack(src, tds)
		}
		mine := make([]int64, infoLen)
		if err := xfer.Scatter(cl.Step, infos, mine, src); err != nil {
			return cl.errorf("scattering sizes: %w", err)
		}
		if mine[0] != 0 {
			return cl.spread(src, local)
		}
		var recv []uint64
		var lerr error
		if cl.rank != src {
			if lerr = cl.checkInfo(src, mine); lerr == nil {
				lerr = cl.ready()
			}
			if lerr == nil {
				recv = make([]uint64, blockWords(mine))
			}
		} else {
			lerr = cl.ready()
		}
		if err := cl.agree(lerr); err != nil {
			return err
		}
		blk := recv // src keeps its own block
		if cl.rank == src {
			blk = send
		}
		if err := xfer.Scatterv(cl.Step, blk, counts, displs, src); err != nil {
			return cl.errorf("scattering blocks: %w", err)
		}
		if cl.rank == src {
			recv = own
		}
		td, err := cl.unpack(src, mine, recv)
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
func (cl *coll) scatterPack(src int, tds []*TensorDict) (infos []int64, send, own []uint64, displs, counts []int, err error) {
	infos = make([]int64, infoLen*cl.size)
	fail := func(err error) ([]int64, []uint64, []uint64, []int, []int, error) {
		for r := range cl.size {
			infos[r*infoLen] = 1
		}
		return infos, nil, nil, nil, nil, err
	}
	if len(tds) != cl.size {
		return fail(fmt.Errorf("%d tensordicts for %d ranks", len(tds), cl.size))
	}
	blocks := make([]block, cl.size)
	for r, td := range tds {
		b, err := cl.prepareBlock(td)
		if err != nil {
			return fail(fmt.Errorf("tensordict %d: %w", r, err))
		}
		blocks[r] = b
		in := b.info(nil)
		copy(infos[r*infoLen:], in[:])
	}
	// Check the source's own sizes as receivers will: a block the
	// receivers must refuse is refused here, before anything moves.
	displs, counts, words, err := cl.layoutBlocks(infos, func(r int) bool { return r != src })
	if err != nil {
		return fail(err)
	}
	if err := cl.checkInfo(src, infos[src*infoLen:(src+1)*infoLen]); err != nil {
		return fail(err)
	}
	send = make([]uint64, words)
	own = make([]uint64, blockWords(infos[src*infoLen:(src+1)*infoLen]))
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
