package tensordict

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

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
	td    *TensorDict
	class string
	meta  []byte
	total int
}

// prepareBlock lays td out. It returns an error (without the op prefix) if
// td cannot be sent.
func (cl *coll) prepareBlock(td *TensorDict) (block, error) {
	if td == nil {
		return block{}, fmt.Errorf("nil tensordict")
	}
	if err := cl.ready(); err != nil {
		return block{}, err
	}
	meta, total, err := Layout(td)
	if err != nil {
		return block{}, err
	}
	return block{td: td, class: td.ClassName(), meta: meta, total: total}, nil
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
func (cl *coll) checkInfo(r int, in []int64) error {
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
func (cl *coll) layoutBlocks(infos []int64, include func(r int) bool) (displs, counts []int, words int, err error) {
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
	if _, err := b.td.ConsolidateInto(buf[:b.total]); err != nil {
		return err
	}
	n := b.total + copy(buf[b.total:], b.class)
	n += copy(buf[n:], b.meta)
	clear(buf[n:])
	return nil
}

// unpack rebuilds the TensorDict rank r sent from its block words, which
// must hold the block described by in. The result's storage views words.
func (cl *coll) unpack(r int, in []int64, words []uint64) (*TensorDict, error) {
	buf := wordsAsBytes(words)
	total, cls, meta := int(in[3]), int(in[1]), int(in[2])
	if len(buf) < total+cls+meta {
		return nil, cl.errorf("rank %d: block of %d bytes, need %d", r, len(buf), total+cls+meta)
	}
	st := tensor.StorageOf(buf[:total:total])
	class := string(buf[total : total+cls])
	return cl.rebuild(r, st, buf[total+cls:total+cls+meta:total+cls+meta], class)
}

// wordBytes views w as bytes.
func wordsAsBytes(w []uint64) []byte {
	if len(w) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 8*len(w))
}

// firstFailed returns the lowest rank whose info says it failed, or size.
func (cl *coll) firstFailed(infos []int64) int {
	for r := range cl.size {
		if infos[r*infoLen] != 0 {
			return r
		}
	}
	return cl.size
}
