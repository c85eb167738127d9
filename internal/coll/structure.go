// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// CheckSame is the check every rank runs before a collective that needs
// the same structure on every rank (AllReduce, Reduce, GatherAndStack).
// hash is this rank's structure hash (codec.Hasher, in sorted order) and
// describe its structure, built only when the hashes differ; local is
// this rank's own error (nil if it is ready). extra values are combined
// with the maximum across ranks and returned. If some rank failed, every
// rank returns that rank's error (see ShareFailure); if the structures
// differ, every rank returns the same Errors.Structure error, comparing
// with rank ref. It costs one exchange of a few words (xfer.Combine) when
// all is well.
func (cl *Call) CheckSame(hash uint64, describe func() codec.Structure, ref int, local error, extra ...uint64) ([]uint64, error) {
	v := make([]uint64, 0, 4+len(extra))
	v = append(v, hash, ^hash)
	v = append(v, extra...)
	fail := uint64(0)
	if local != nil {
		fail = uint64(cl.Size - cl.Rank)
	}
	v = append(v, uint64(1-cl.unbounded()), fail) // MAX of bounded: MIN of unbounded
	if err := xfer.Combine(cl.Step, v, mpi.OpMax); err != nil {
		return nil, cl.Errorf("comparing structures: %w", err)
	}
	cl.Agreed(int32(1 - v[len(v)-2]))
	if f := v[len(v)-1]; f != 0 {
		return nil, cl.Spread(cl.Size-int(f), local)
	}
	if v[0] != ^v[1] {
		return nil, cl.explainMismatch(describe(), ref)
	}
	return v[2 : 2+len(extra)], nil
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
	Key    codec.Key `json:"k"`
	Detail string    `json:"d"`
}

// explainMismatch runs on every rank once the structure hashes disagreed.
// It broadcasts the reference rank's description, lets each rank compare
// its own with it, gathers the differences, and returns the same error on
// every rank: the lowest differing rank's.
func (cl *Call) explainMismatch(mine codec.Structure, ref int) error {
	var enc []byte
	if cl.Rank == ref {
		enc = encodeStructure(mine)
	}
	n := []int64{int64(len(enc))}
	if err := xfer.Bcast(cl.Step, n, ref); err != nil {
		return cl.Errorf("structures differ; broadcasting rank %d's structure: %w", ref, err)
	}
	if n[0] < 0 || n[0] > maxDescBytes {
		return cl.Errorf("structures differ between ranks (rank %d's description of %d bytes is too long to compare)", ref, n[0])
	}
	if cl.Rank != ref {
		enc = make([]byte, n[0])
	}
	if err := xfer.Bcast(cl.Step, enc, ref); err != nil {
		return cl.Errorf("structures differ; broadcasting rank %d's structure: %w", ref, err)
	}
	slot := make([]byte, diffSlot)
	if cl.Rank != ref {
		putDiff(slot, diffEncoded(mine, cl.Rank, enc, ref))
	}
	all := make([]byte, diffSlot*cl.Size)
	if err := xfer.Allgather(cl.Step, slot, all); err != nil {
		return cl.Errorf("structures differ; gathering differences: %w", err)
	}
	for r := range cl.Size {
		if sd, ok := getDiff(all[r*diffSlot : (r+1)*diffSlot]); ok {
			return cl.Errorf("%w", cl.Errors.Structure(cl.Op, ref, r, sd.Key, sd.Detail))
		}
	}
	// The hashes differed but no rank found a difference: the descriptions
	// are equal yet hash differently, which cannot happen with one build.
	return cl.Errorf("structure hashes differ between ranks but their descriptions match (different tdmpi versions?)")
}

// diffEncoded compares d, the structure of rank me, with enc, rank r's
// encoded structure: nil when they are the same.
func diffEncoded(d codec.Structure, me int, enc []byte, r int) *slotDiff {
	var rd codec.Structure
	if err := json.Unmarshal(enc, &rd); err != nil {
		return &slotDiff{Detail: fmt.Sprintf("cannot decode rank %d's structure: %v", r, err)}
	}
	k, detail, ok := diffRanks(d, me, rd, r)
	if ok {
		return nil
	}
	return &slotDiff{Key: k, Detail: detail}
}

// putDiff writes sd (nil: none) into slot, diffSlot bytes: its JSON
// length, then its JSON, the detail cut short if it would not fit.
func putDiff(slot []byte, sd *slotDiff) {
	if sd == nil {
		return
	}
	b, _ := json.Marshal(sd)
	if len(b) > diffSlot-8 {
		b, _ = json.Marshal(slotDiff{Detail: clipText(sd.Detail, diffSlot/2)})
	}
	binary.LittleEndian.PutUint64(slot, uint64(len(b)))
	copy(slot[8:], b)
}

// getDiff reads a slot putDiff wrote: ok is false when it holds none.
func getDiff(slot []byte) (sd slotDiff, ok bool) {
	m := binary.LittleEndian.Uint64(slot)
	if m == 0 {
		return sd, false
	}
	if m > diffSlot-8 || json.Unmarshal(slot[8:8+m], &sd) != nil {
		sd = slotDiff{Detail: "(undecodable difference)"}
	}
	return sd, true
}

// encodeStructure returns the JSON encoding of d, which the ranks exchange
// on a mismatch.
func encodeStructure(d codec.Structure) []byte {
	b, err := json.Marshal(d)
	if err != nil {
		// Keys are strings, dtypes and shapes ints: Marshal cannot fail.
		panic("coll: encoding a structure description: " + err.Error())
	}
	return b
}

// describeLeaf formats a leaf as "float32[3 4]".
func describeLeaf(l codec.StructLeaf) string { return fmt.Sprintf("%v%v", l.DType, l.Shape) }

// diffRanks compares d, the structure of rank me, with ref, the structure
// of rank r, whose leaves are in sorted key order (codec.CompareKeys). It
// returns the first differing key (nil for the batch size) and a
// description, or ok true when they are the same.
func diffRanks(d codec.Structure, me int, ref codec.Structure, r int) (k codec.Key, detail string, ok bool) {
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
			return d.Leaves[i].Key, fmt.Sprintf("%s on rank %d, missing on rank %d", describeLeaf(d.Leaves[i]), me, r), false
		case c > 0:
			return ref.Leaves[j].Key, fmt.Sprintf("missing on rank %d, %s on rank %d", me, describeLeaf(ref.Leaves[j]), r), false
		}
		a, b := d.Leaves[i], ref.Leaves[j]
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
			return a.Key, fmt.Sprintf("%s on rank %d, %s on rank %d", describeLeaf(a), me, describeLeaf(b), r), false
		}
		i++
		j++
	}
	return nil, "", true
}

// clipText returns s cut to at most n bytes, marked "...".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
