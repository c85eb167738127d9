package tensordict

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/xfer"
)

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
func (cl *coll) explainMismatch(mine codec.Structure, ref int) error {
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
