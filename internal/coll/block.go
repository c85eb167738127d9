// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
)

// AllGather, Scatter and GatherAndStack move one block per rank. A block is
// a TensorDict's consolidated storage followed by its tensorclass name and
// its consolidated metadata (JSON), padded to a multiple of 8 bytes. The
// storage of a consolidated layout is itself a multiple of 8 bytes, so
// blocks are counted in 8-byte words: the MPI calls move uint64 elements,
// and every storage lands 8-byte aligned, ready for typed views.
//
// Before the blocks move, the ranks exchange each block's sizes (InfoLen
// int64 values, its info), check them against their limits and agree
// that every rank is ready.

// InfoLen is the number of int64 values describing a block: failed (0 or
// 1), class name length, metadata length, storage length.
const InfoLen = 4

// Block is one rank's block, laid out but not yet packed: its class name,
// metadata and storage length.
type Block struct {
	Class string
	Meta  []byte
	Total int
}

// Info returns b's info, or a failed info if err is not nil.
func (b Block) Info(err error) [InfoLen]int64 {
	if err != nil {
		return [InfoLen]int64{1, 0, 0, 0}
	}
	return [InfoLen]int64{0, int64(len(b.Class)), int64(len(b.Meta)), int64(b.Total)}
}

// Pack writes b into dst, which has exactly b's words: the storage, which
// leaves writes into the bytes it is given, then the class name and the
// metadata, then zeros.
func (b Block) Pack(dst []uint64, leaves func(storage []byte) error) error {
	buf := WordsAsBytes(dst)
	if err := leaves(buf[:b.Total]); err != nil {
		return fmt.Errorf("packing the leaves: %w", err)
	}
	n := b.Total + copy(buf[b.Total:], b.Class)
	n += copy(buf[n:], b.Meta)
	clear(buf[n:])
	return nil
}

// Words returns the number of 8-byte words of the block that info in
// describes. Valid infos (CheckInfo) cannot overflow.
func Words(in []int64) int {
	return int((in[1] + in[2] + in[3] + 7) / 8)
}

// CheckInfo validates the info rank r announced against the limits.
func (cl *Call) CheckInfo(r int, in []int64) error {
	h := wire.Header{Kind: wire.KindGather, Flags: wire.FlagConsolidated, Total: in[3], MetaLen: in[2], Chunk: wire.MaxChunk}
	if in[1] < 0 || in[1] > math.MaxInt32 {
		return fmt.Errorf("rank %d announced a class name of %d bytes", r, in[1])
	}
	h.ClassLen = int(in[1])
	if err := h.Check(cl.Lim); err != nil {
		return fmt.Errorf("rank %d: %w", r, err)
	}
	if in[3]%8 != 0 {
		return fmt.Errorf("rank %d announced a storage of %d bytes, not a multiple of 8", r, in[3])
	}
	return nil
}

// FirstFailed returns the lowest rank whose info says it failed, or the
// group's size.
func (cl *Call) FirstFailed(infos []int64) int {
	for r := range cl.Size {
		if infos[r*InfoLen] != 0 {
			return r
		}
	}
	return cl.Size
}

// LayoutBlocks checks the infos of ranks (nil for all) and returns each
// rank's offset and count in words in one buffer holding all of them
// (ranks left out get count 0), and the buffer's length in words. The sum
// of the storages must stay within the MaxTotal limit, and the buffer
// within what one MPI call can address and the memory available.
func (cl *Call) LayoutBlocks(infos []int64, include func(r int) bool) (displs, counts []int, words int, err error) {
	displs, counts = make([]int, cl.Size), make([]int, cl.Size)
	var sum int64
	for r := range cl.Size {
		in := infos[r*InfoLen : (r+1)*InfoLen]
		if include != nil && !include(r) {
			continue
		}
		if err := cl.CheckInfo(r, in); err != nil {
			return nil, nil, 0, err
		}
		sum += in[3]
		if sum > cl.Lim.MaxTotal {
			return nil, nil, 0, &wire.LimitError{Field: "total of the storages", Value: sum, Limit: cl.Lim.MaxTotal}
		}
		displs[r], counts[r] = words, Words(in)
		words += counts[r]
		if words > math.MaxInt32 {
			return nil, nil, 0, fmt.Errorf("blocks of %d bytes and more exceed what one MPI call can move (%d bytes)", int64(words)*8, int64(math.MaxInt32)*8)
		}
	}
	return displs, counts, words, mem.CheckAvailable(int64(words) * 8)
}

// Unblock splits the block rank r sent, words, which must hold the block
// its info in describes, into its storage, class name and metadata, which
// view words.
func (cl *Call) Unblock(r int, in []int64, words []uint64) (storage []byte, class string, meta []byte, err error) {
	buf := WordsAsBytes(words)
	total, cls, n := int(in[3]), int(in[1]), int(in[2])
	if len(buf) < total+cls+n {
		return nil, "", nil, cl.Errorf("rank %d: block of %d bytes, need %d", r, len(buf), total+cls+n)
	}
	return buf[:total:total], string(buf[total : total+cls]), buf[total+cls : total+cls+n : total+cls+n], nil
}

// RecvWords returns n words for the blocks a collective receives, from the
// receive pool (mem.Recv) and not cleared: the caller has every word
// written (by MPI and Pack) before anything reads the blocks, and drops
// the words unread if that fails.
func RecvWords(n int) ([]uint64, error) {
	b, err := mem.Recv(8 * n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// WordsAsBytes views w as bytes.
func WordsAsBytes(w []uint64) []byte {
	if len(w) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 8*len(w))
}

// Gathered is the blocks a gather moved (GatherBlocks).
type Gathered struct {
	infos          []int64
	buf            []uint64
	displs, counts []int
}

// Block returns rank r's info and block words.
func (g Gathered) Block(r int) (in []int64, words []uint64) {
	return g.infos[r*InfoLen : (r+1)*InfoLen], g.buf[g.displs[r] : g.displs[r]+g.counts[r]]
}

// GatherBlocks moves every rank's block b, whose storage pack writes, to
// root, or to every rank for a negative root (AllGather), in one buffer
// from the receive pool. The ranks first exchange their infos, check them
// against their limits and agree (ShareFailure) that every rank could
// allocate and pack. local is this rank's error, which makes every rank
// fail (AllGather; a gather to a root checks the ranks before, CheckSame).
// The ranks that receive nothing get an empty Gathered (Empty).
func (cl *Call) GatherBlocks(b Block, pack func(storage []byte) error, local error, root int) (g Gathered, err error) {
	all, mine := root < 0, b.Info(local)
	if all || cl.Rank == root {
		g.infos = make([]int64, InfoLen*cl.Size)
	}
	// A rank that only sends packs its block before the infos move, so
	// that a failure to pack is caught by the agreement below.
	var own []uint64
	var lerr error
	if !all && cl.Rank != root {
		own = make([]uint64, Words(mine[:]))
		lerr = b.Pack(own, pack)
	}
	if all {
		err = xfer.Allgather(cl.Step, mine[:], g.infos)
	} else {
		err = xfer.Gather(cl.Step, mine[:], g.infos, root)
	}
	if err != nil {
		return g, cl.Errorf("gathering sizes: %w", err)
	}
	if all {
		if r := cl.FirstFailed(g.infos); r < cl.Size {
			return g, cl.Spread(r, local)
		}
	}
	if g.infos != nil {
		var words int
		if g.displs, g.counts, words, lerr = cl.LayoutBlocks(g.infos, nil); lerr == nil {
			if g.buf, lerr = RecvWords(words); lerr == nil {
				_, w := g.Block(cl.Rank)
				lerr = b.Pack(w, pack)
			}
		}
	}
	if err := cl.ShareFailure(lerr); err != nil {
		return g, err
	}
	cl.Defer() // IAllGather: the blocks are left to Wait
	switch {
	case all:
		err = xfer.Allgatherv(cl.Step, g.buf, g.counts, g.displs)
	case cl.Rank == root:
		err = xfer.Gatherv(cl.Step, g.buf, g.counts, g.displs, root)
	default:
		err = xfer.Gatherv(cl.Step, own, nil, nil, root)
	}
	if err != nil {
		return g, cl.Errorf("gathering blocks: %w", err)
	}
	return g, nil
}

// Empty reports whether g holds no blocks: this rank received none.
func (g Gathered) Empty() bool { return g.infos == nil }

// ScatterBlocks moves blocks[r] of rank src to rank r, and returns this
// rank's info and block. On src, blocks has one block per rank, whose
// storages pack writes, or local is the error that kept src from laying
// them out; elsewhere both are ignored. src checks every block as its
// receiver will and, once every receiver has checked its info and
// allocated (ShareFailure), sends them in one buffer; its own block is
// packed apart, so that its result does not keep the others' alive.
func (cl *Call) ScatterBlocks(src int, blocks []Block, pack func(r int, storage []byte) error, local error) (in []int64, words []uint64, err error) {
	var infos []int64
	var send []uint64
	var displs, counts []int
	if cl.Rank == src {
		infos, send, words, displs, counts, local = cl.packScatter(src, blocks, pack, local)
	}
	in = make([]int64, InfoLen)
	if err := xfer.Scatter(cl.Step, infos, in, src); err != nil {
		return nil, nil, cl.Errorf("scattering sizes: %w", err)
	}
	if in[0] != 0 {
		return nil, nil, cl.Spread(src, local)
	}
	lerr := cl.Ready()
	if cl.Rank != src {
		if err := cl.CheckInfo(src, in); err != nil {
			lerr = err
		}
		if lerr == nil {
			words, lerr = RecvWords(Words(in))
		}
	}
	if err := cl.ShareFailure(lerr); err != nil {
		return nil, nil, err
	}
	blk := words // src keeps its own block
	if cl.Rank == src {
		blk = send
	}
	if err := xfer.Scatterv(cl.Step, blk, counts, displs, src); err != nil {
		return nil, nil, cl.Errorf("scattering blocks: %w", err)
	}
	return in, words, nil
}

// packScatter lays out and packs blocks on the source rank: the infos of
// each rank's block (marked failed for every rank if something is
// wrong), the send buffer with every other rank's block, src's own block
// apart, and the send buffer's displacements and counts in words.
func (cl *Call) packScatter(src int, blocks []Block, pack func(r int, storage []byte) error, local error) (infos []int64, send, own []uint64, displs, counts []int, err error) {
	infos = make([]int64, InfoLen*cl.Size)
	fail := func(err error) ([]int64, []uint64, []uint64, []int, []int, error) {
		for r := range cl.Size {
			infos[r*InfoLen] = 1
		}
		return infos, nil, nil, nil, nil, err
	}
	if local != nil {
		return fail(local)
	}
	for r, b := range blocks {
		in := b.Info(nil)
		copy(infos[r*InfoLen:], in[:])
	}
	// Check the source's own sizes as receivers will: a block the
	// receivers must refuse is refused here, before anything moves.
	displs, counts, words, err := cl.LayoutBlocks(infos, func(r int) bool { return r != src })
	if err == nil {
		err = cl.CheckInfo(src, infos[src*InfoLen:(src+1)*InfoLen])
	}
	if err == nil {
		own, err = RecvWords(Words(infos[src*InfoLen : (src+1)*InfoLen]))
	}
	if err != nil {
		return fail(err)
	}
	send = make([]uint64, words)
	for r, b := range blocks {
		dst := own
		if r != src {
			dst = send[displs[r] : displs[r]+counts[r]]
		}
		if err := b.Pack(dst, func(st []byte) error { return pack(r, st) }); err != nil {
			return fail(fmt.Errorf("tensordict %d: %w", r, err))
		}
	}
	return infos, send, own, displs, counts, nil
}
