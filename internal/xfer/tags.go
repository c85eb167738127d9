// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"fmt"
	"math/bits"

	"github.com/tdmpi/tdmpi/internal/proto"
)

// Tags on a group's library communicator (laid out by package group).
// Per-leaf messages use the tags the caller picks (tensordict's WithTag,
// WithPseudoRandTags), below group.MaxUserTag; a Send's header travels on
// its first leaf's tag (HeaderTag). InitRemote's headers have a tag of
// their own, so a FromRemoteInit never takes the header of a Send.
// Payloads (storages and their chunks) travel on tags the group hands out
// (proto.PayloadTag), carried in the header, so that concurrent
// transfers between the same two ranks cannot mix.

// InitHeaderTag is the tag of InitRemote's headers: the first of the
// group's reserved header tags.
const InitHeaderTag = proto.HeaderTag + 1 // the value of earlier builds, which it must meet

// IntGenerator returns the pseudo-random tag tensordict derives from seed,
// bit for bit as Python tensordict's int_generator: numpy's
// default_rng(seed) (SeedSequence feeding PCG64), eight bytes from it read
// as a big-endian integer, modulo 10000. Chained from 10 it gives 6756,
// 1717, 4410, 9740, ... It panics if seed is negative.
func IntGenerator(seed int) int {
	if seed < 0 {
		panic(fmt.Sprintf("tensordict: IntGenerator: negative seed %d", seed))
	}
	x := newPCG64(uint64(seed)).next64()
	return int(bits.ReverseBytes64(x) % 10000)
}

// LeafTags returns the tag of each of n per-leaf messages starting from
// initTag, as tensordict's send: consecutive tags, or with pseudoRand each
// tag IntGenerator(previous+1), the first IntGenerator(initTag).
func LeafTags(dst []int, n, initTag int, pseudoRand bool) []int {
	tag := initTag - 1
	for range n {
		if pseudoRand {
			tag = IntGenerator(tag + 1)
		} else {
			tag++
		}
		dst = append(dst, tag)
	}
	return dst
}

// numpy's SeedSequence constants (numpy/random/bit_generator.pyx).
const (
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
	ssPoolSize = 4
)

// seedPool returns the entropy pool of numpy's SeedSequence(seed) with no
// spawn key.
func seedPool(seed uint64) [ssPoolSize]uint32 {
	entropy := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		entropy = append(entropy, hi)
	}
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		return v ^ v>>ssXShift
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		return r ^ r>>ssXShift
	}
	var pool [ssPoolSize]uint32
	for i := range pool {
		var e uint32
		if i < len(entropy) {
			e = entropy[i]
		}
		pool[i] = hashmix(e)
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	return pool
}

// generateState returns SeedSequence.generate_state(4, np.uint64).
func generateState(pool [ssPoolSize]uint32) [4]uint64 {
	hashConst := uint32(ssInitB)
	var w [8]uint32
	for i := range w {
		v := pool[i%ssPoolSize]
		v ^= hashConst
		hashConst *= ssMultB
		v *= hashConst
		w[i] = v ^ v>>ssXShift
	}
	var s [4]uint64
	for i := range s {
		s[i] = uint64(w[2*i]) | uint64(w[2*i+1])<<32
	}
	return s
}

// pcg64 is numpy's PCG64 (XSL-RR 128/64) bit generator.
type pcg64 struct {
	stateHi, stateLo uint64
	incHi, incLo     uint64
}

// PCG's default 128-bit multiplier.
const (
	pcgMulHi = 2549297995355413924
	pcgMulLo = 4865540595714422341
)

// newPCG64 seeds a PCG64 as numpy's PCG64(SeedSequence(seed)).
func newPCG64(seed uint64) *pcg64 {
	v := generateState(seedPool(seed))
	p := &pcg64{}
	// inc = (initseq << 1) | 1 with initseq = v[2]:v[3].
	p.incHi = v[2]<<1 | v[3]>>63
	p.incLo = v[3]<<1 | 1
	p.step()
	var c uint64
	p.stateLo, c = bits.Add64(p.stateLo, v[1], 0)
	p.stateHi, _ = bits.Add64(p.stateHi, v[0], c)
	p.step()
	return p
}

// step advances the state: state = state*mul + inc (mod 2^128).
func (p *pcg64) step() {
	hi, lo := bits.Mul64(p.stateLo, pcgMulLo)
	hi += p.stateHi*pcgMulLo + p.stateLo*pcgMulHi
	var c uint64
	p.stateLo, c = bits.Add64(lo, p.incLo, 0)
	p.stateHi, _ = bits.Add64(hi, p.incHi, c)
}

// next64 returns the next 64-bit output.
func (p *pcg64) next64() uint64 {
	p.step()
	return bits.RotateLeft64(p.stateHi^p.stateLo, -int(p.stateHi>>58))
}

// HeaderTag is the tag of the header message: the first leaf's tag, or the
// initial tag of a TensorDict with no leaves. Sent first on that tag, the
// header always precedes the leaf, since MPI does not reorder messages of
// one sender on one tag.
func HeaderTag(tags []int, initTag int) int {
	if len(tags) > 0 {
		return tags[0]
	}
	return initTag
}
