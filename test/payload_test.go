// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Payloads are derived from seeds both sides of a transfer know, so a
// receiver checks every byte it got without the sender's data: leaf bytes
// are a counter-based stream (word i of the stream of seed s is mix(s, i)),
// and a leaf is checked by comparing its checksum with the checksum of the
// stream, computed without materializing it.

// mix returns word i of the stream of seed (splitmix64's finalizer over a
// counter), so any word can be computed on its own.
func mix(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// seedOf combines numbers into a seed.
func seedOf(parts ...uint64) uint64 {
	s := uint64(0x243f6a8885a308d3)
	for _, p := range parts {
		s = mix(s^p, 0)
	}
	return s
}

// fillStream writes the stream of seed into b.
func fillStream(b []byte, seed uint64) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], mix(seed, uint64(i/8)))
	}
	if i < len(b) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], mix(seed, uint64(i/8)))
		copy(b[i:], w[:])
	}
}

// sumStep folds one 8-byte word into a checksum.
func sumStep(h, w uint64) uint64 {
	h = (h ^ w) * 0x100000001b3
	return h ^ h>>29
}

// checksum returns the checksum of b: its words, the last one padded with
// zeros, folded in order, and the length.
func checksum(b []byte) uint64 {
	h := uint64(len(b))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		h = sumStep(h, binary.LittleEndian.Uint64(b[i:]))
	}
	if i < len(b) {
		var w [8]byte
		copy(w[:], b[i:])
		h = sumStep(h, binary.LittleEndian.Uint64(w[:]))
	}
	return h
}

// streamChecksum returns checksum of the first n bytes of the stream of
// seed, without allocating them.
func streamChecksum(seed uint64, n int) uint64 {
	h := uint64(n)
	words := n / 8
	for i := range words {
		h = sumStep(h, mix(seed, uint64(i)))
	}
	if tail := n % 8; tail > 0 {
		w := mix(seed, uint64(words))
		h = sumStep(h, w&(1<<(8*tail)-1))
	}
	return h
}

// reduceWord is element i of the int64 leaf of seed on one rank in
// all-reduce payloads: small enough that sums over ranks never overflow.
func reduceWord(seed, i uint64) int64 { return int64(mix(seed, i) & 0xffffffff) }

// sumChecksum returns the checksum of the int64 leaf of n elements whose
// element i is the sum over the seeds of reduceWord.
func sumChecksum(seeds []uint64, n int) uint64 {
	h := uint64(8 * n)
	for i := range n {
		var s int64
		for _, seed := range seeds {
			s += reduceWord(seed, uint64(i))
		}
		h = sumStep(h, uint64(s))
	}
	return h
}

// leafSpec describes one leaf of a generated TensorDict.
type leafSpec struct {
	key  tensordict.Key
	dt   tensor.DType
	n    int    // elements
	seed uint64 // content seed (for reduce payloads: mixed with the rank)
}

// tdSpec describes a generated TensorDict: an "id" leaf (int64 [2]: the
// group instance and the operation number, which tells a lost or
// duplicated message from a corrupted one) and random leaves.
type tdSpec struct {
	inst, iter int64
	leaves     []leafSpec
	bytes      int // payload bytes, the id leaf excluded
}

var specDTypes = []tensor.DType{tensor.Uint8, tensor.Int32, tensor.Float32, tensor.Int64, tensor.Float64, tensor.Int16}

// makeSpec draws a TensorDict of about total payload bytes, split over one
// to four leaves, some nested. reduce restricts leaves to int64.
func makeSpec(rng *rand.Rand, inst, iter int64, total int, reduce bool) tdSpec {
	sp := tdSpec{inst: inst, iter: iter}
	nl := 1 + rng.IntN(4)
	left := total
	for i := range nl {
		part := left
		if i < nl-1 {
			part = left / (nl - i)
		}
		dt := tensor.Int64
		if !reduce {
			dt = specDTypes[rng.IntN(len(specDTypes))]
		}
		n := max(1, part/dt.Size())
		left -= part
		key := tensordict.K(fmt.Sprintf("l%d", i))
		if rng.IntN(2) == 0 {
			key = tensordict.K("nest", fmt.Sprintf("d%d", rng.IntN(2)), fmt.Sprintf("l%d", i))
		}
		sp.leaves = append(sp.leaves, leafSpec{key: key, dt: dt, n: n, seed: seedOf(uint64(inst), uint64(iter), uint64(i))})
		sp.bytes += n * dt.Size()
	}
	return sp
}

// logUniform draws a size in [lo, hi] with a uniform logarithm.
func logUniform(rng *rand.Rand, lo, hi int) int {
	l := math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))
	return min(hi, max(lo, int(math.Exp(l))))
}

var idKey = tensordict.K("id")

// build returns the TensorDict of sp: filled with the leaves' streams when
// fill is true (reduce payloads use rank's own words, and only rank 0 of
// the group carries the id), zeros otherwise.
func (sp tdSpec) build(fill, reduce bool, rank int) (*tensordict.TensorDict, error) {
	td := tensordict.New()
	id := tensor.Zeros(tensor.Int64, 2)
	if fill && (!reduce || rank == 0) {
		ids, _ := tensor.Data[int64](id)
		ids[0], ids[1] = sp.inst, sp.iter
	}
	if err := td.Set(idKey, id); err != nil {
		return nil, err
	}
	for _, l := range sp.leaves {
		t := tensor.Zeros(l.dt, l.n)
		if fill {
			b, err := t.Bytes()
			if err != nil {
				return nil, err
			}
			if reduce {
				v, _ := tensor.Data[int64](t)
				seed := seedOf(l.seed, uint64(rank))
				for i := range v {
					v[i] = reduceWord(seed, uint64(i))
				}
			} else {
				fillStream(b, l.seed)
			}
		}
		if err := td.Set(l.key, t); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// verify checks every leaf of td against sp: the id leaf names the right
// operation (else the message was lost, duplicated or misrouted) and every
// payload leaf has its stream's checksum (for reduce payloads, the sum over
// ranks ranks). It returns the number of leaves checked.
func (sp tdSpec) verify(td *tensordict.TensorDict, reduce bool, ranks int) (int, error) {
	if td == nil {
		return 0, fmt.Errorf("op %d/%d: nil TensorDict", sp.inst, sp.iter)
	}
	id, err := td.Get(idKey)
	if err != nil {
		return 0, fmt.Errorf("op %d/%d: %w", sp.inst, sp.iter, err)
	}
	ids, err := tensor.Data[int64](id.Contiguous())
	if err != nil || len(ids) != 2 {
		return 0, fmt.Errorf("op %d/%d: id leaf unreadable: %v", sp.inst, sp.iter, err)
	}
	if ids[0] != sp.inst || ids[1] != sp.iter {
		return 0, fmt.Errorf("%w: op %d/%d received the payload of op %d/%d", errMisrouted, sp.inst, sp.iter, ids[0], ids[1])
	}
	if got := len(td.Keys(tensordict.LeavesOnly(), tensordict.IncludeNested())); got != len(sp.leaves)+1 {
		return 1, fmt.Errorf("op %d/%d: %d leaves, want %d", sp.inst, sp.iter, got, len(sp.leaves)+1)
	}
	for i, l := range sp.leaves {
		t, err := td.Get(l.key)
		if err != nil {
			return 1 + i, fmt.Errorf("op %d/%d: %w", sp.inst, sp.iter, err)
		}
		if t.DType() != l.dt || t.Numel() != l.n {
			return 1 + i, fmt.Errorf("op %d/%d: leaf %v is %v%v, want %v[%d]", sp.inst, sp.iter, l.key, t.DType(), t.Shape(), l.dt, l.n)
		}
		b, err := t.Contiguous().Bytes()
		if err != nil {
			return 1 + i, fmt.Errorf("op %d/%d: leaf %v: %w", sp.inst, sp.iter, l.key, err)
		}
		var want uint64
		if reduce {
			seeds := make([]uint64, ranks)
			for r := range seeds {
				seeds[r] = seedOf(l.seed, uint64(r))
			}
			want = sumChecksum(seeds, l.n)
		} else {
			want = streamChecksum(l.seed, len(b))
		}
		if got := checksum(b); got != want {
			return 1 + i, fmt.Errorf("%w: op %d/%d: leaf %v (%d bytes): checksum %#x, want %#x", errCorrupt, sp.inst, sp.iter, l.key, len(b), got, want)
		}
	}
	return 1 + len(sp.leaves), nil
}
