// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package coll

import (
	"encoding/binary"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// The steady state of AllReduce and Reduce. A reduction takes three
// steps: the agreement (every rank's structure, op, root, layout and
// readiness), the reduction, and the closing step. In a loop that reduces
// the same structure the same way call after call, the ranks agreed on
// all of it the call before, so the next call replaces the agreement with
// a header that holds a signature of what was agreed and the flags of any
// rank whose call differs (another structure, op, root or layout, an
// error of its own, a context already ended, a second goroutine),
// combined by xfer.Fold, and needs no closing step. A small reduction
// (inline: leaves of one dtype, fusedMax bytes at most) travels in the
// same messages as the header: one step in all. When no rank flagged and
// every signature matched, the reduction goes on; otherwise every rank
// sees it in the same result, and they all take the three steps, which
// report what differed as before.
//
// Every rank's record of the last agreement (steady, one per group) must
// be the same, or the ranks would not make the same first step: it is
// written only from what every rank sees alike (an agreement's outcome, a
// header's flags), and every call of the family (AllReduce, IAllReduce,
// Reduce, IReduce, which may be mixed across the ranks of one call)
// starts with the header while it is set. A second goroutine's collective
// is flagged when it is seen at the start of a call: by this call or,
// when it comes later, the next.

// A header is the flags, then the signature; an inline reduction's leaves
// follow it, in key order, back to back. Every rank's is of one size.
//
// fusedMax bounds an inline reduction's bytes: a buffer of 256 bytes at
// most. Up to there one step took 2.1-2.4 us against 3.5-4.1 for three
// (16 uint8 leaves of 8-128 bytes in all, np 2, tdmpi bench, four
// alternating runs); beyond it Open MPI's shared memory sends each
// message more slowly, and one step of 256 bytes to 2 KiB of leaves took
// 1.07-1.38x the three steps' time (three alternating runs of builds with
// each bound).
const (
	fusedHead     = 16
	fusedMax      = 256 - fusedHead
	fusedChanged  = 1 // this rank's call is not the agreed one
	fusedMismatch = 2 // the signatures differed
	fusedBounded  = 4 // this rank's context can end: nonblocking steps
)

// steady is a group's last agreed AllReduce, for the next to start from.
// Collectives on the group run one at a time on this rank
// (proto.Collective), so it needs no lock of its own.
type steady struct {
	sig      uint64 // 0: none
	inline   bool   // the leaves travel with the header
	dt       tensor.DType
	op       Op
	buf, tmp []uint64 // Fold's buffers, reused
}

var steadies = proto.Slot[steady]{New: func() *steady { return new(steady) }}

// steadySig returns the signature of a reduction of r with op to root
// (-1: every rank), whose structure hashes to hash, and whether its leaves
// travel inline: of one dtype that steady.combine reduces with op, and at
// most fusedMax bytes. r is nil on a rank that has no leaves to reduce:
// its signature is 0.
func (r *Reduction) steadySig(op Op, root int, hash uint64) (sig uint64, inline bool) {
	if r == nil {
		return 0, false
	}
	var b [48]byte
	binary.LittleEndian.PutUint64(b[0:], hash)
	binary.LittleEndian.PutUint64(b[8:], uint64(op))
	binary.LittleEndian.PutUint64(b[16:], r.layout)
	if r.fast {
		b[24] = 1
	}
	binary.LittleEndian.PutUint32(b[28:], uint32(root+1))
	if len(r.dtypes) == 1 && r.bytes <= fusedMax {
		dt := r.dtypes[0].v
		_, err := op.mpiOp(dt)
		inline = err == nil && !isHalf(dt) && !dt.IsComplex()
		binary.LittleEndian.PutUint64(b[32:], uint64(dt))
		binary.LittleEndian.PutUint64(b[40:], uint64(r.bytes))
	}
	return codec.FNV64a(b[:]) | 1, inline // never 0, which means none
}

// agreed records, once every rank agreed on a reduction of red with op to
// root (err nil) or failed to, what the next call starts from.
func (st *steady) agreed(red *Reduction, op Op, root int, hash uint64, err error) {
	st.sig = 0
	if err != nil {
		return
	}
	sig, inline := red.steadySig(op, root, hash)
	size := fusedHead
	if inline {
		size += red.bytes
		st.dt = red.dtypes[0].v
	}
	if words := (size + 7) / 8; len(st.buf) != words {
		st.buf, st.tmp = make([]uint64, words), make([]uint64, words)
	}
	st.sig, st.inline, st.op = sig, inline, op
}

// reduceSteady runs a reduction of red with op to root from the steady
// state st (see steady). It reports done false when some rank's call was
// not the agreed one: every rank then goes the long way, which reports
// what differed, and st is cleared. local is this rank's own error.
func (cl *Call) reduceSteady(st *steady, red *Reduction, op Op, root int, local error, hash uint64) (done bool, err error) {
	buf, tmp := WordsAsBytes(st.buf), WordsAsBytes(st.tmp)
	flags := uint64(fusedChanged)
	if sig, _ := red.steadySig(op, root, hash); sig == st.sig && local == nil && cl.Ready() == nil {
		flags = 0
		if cl.unbounded() == 0 {
			flags = fusedBounded
		}
		for off, i := fusedHead, 0; st.inline && i < len(red.leaves); i++ {
			x := red.leaves[i]
			if copyOut(buf[off:], x) != nil {
				flags = fusedChanged // the long way names the leaf
				break
			}
			off += x.NBytes()
		}
	}
	binary.NativeEndian.PutUint64(buf, flags)
	binary.NativeEndian.PutUint64(buf[8:], st.sig)
	res, err := xfer.Fold(cl.Step, buf, tmp, st.combine)
	if err != nil {
		st.sig = 0
		return true, cl.Errorf("comparing with the last call: %w", err)
	}
	flags = binary.NativeEndian.Uint64(res)
	if flags&(fusedChanged|fusedMismatch) != 0 {
		st.sig = 0
		return false, nil
	}
	cl.closed = true // the header was the agreement: nothing to close
	if !st.inline {
		cl.Agreed(int32(1 - flags/fusedBounded))
		cl.Defer()
		return true, cl.reduceData(red, op, root, red.fast)
	}
	if root >= 0 && root != cl.Rank {
		return true, nil // a Reduce's other ranks only read their leaves
	}
	off := fusedHead
	for i, x := range red.leaves {
		n := x.NBytes()
		if err := copyIn(x, res[off:off+n]); err != nil {
			return true, cl.Errorf("key %v: %w", red.key(i), err)
		}
		off += n
	}
	if op == Avg {
		return true, cl.average(red)
	}
	return true, nil
}

// combine combines the header lo into hi: their flags, and, when both
// carry st's signature and neither is flagged changed, their inline
// elements (hi = lo op hi).
func (st *steady) combine(lo, hi []byte) {
	e := binary.NativeEndian
	flags := e.Uint64(lo) | e.Uint64(hi)
	if e.Uint64(lo[8:]) != e.Uint64(hi[8:]) {
		flags |= fusedMismatch
	}
	e.PutUint64(hi, flags)
	if flags&(fusedChanged|fusedMismatch) != 0 || !st.inline {
		return
	}
	x, y := lo[fusedHead:], hi[fusedHead:]
	switch st.dt {
	case tensor.Bool:
		foldBool(x, y, st.op)
	case tensor.Uint8:
		foldInt(x, y, st.op)
	case tensor.Int8:
		foldInt(castBytes[int8](x), castBytes[int8](y), st.op)
	case tensor.Int16:
		foldInt(castBytes[int16](x), castBytes[int16](y), st.op)
	case tensor.Int32:
		foldInt(castBytes[int32](x), castBytes[int32](y), st.op)
	case tensor.Int64:
		foldInt(castBytes[int64](x), castBytes[int64](y), st.op)
	case tensor.Float32:
		foldNum(castBytes[float32](x), castBytes[float32](y), st.op)
	case tensor.Float64:
		foldNum(castBytes[float64](x), castBytes[float64](y), st.op)
	}
}

// foldNum sets y to x op y for the ops of every number (Avg sums).
func foldNum[T int8 | uint8 | int16 | int32 | int64 | float32 | float64](x, y []T, op Op) {
	y = y[:len(x)]
	switch op {
	case Sum, Avg:
		for i := range y {
			y[i] = x[i] + y[i]
		}
	case Prod:
		for i := range y {
			y[i] = x[i] * y[i]
		}
	case Min:
		for i := range y {
			y[i] = min(x[i], y[i])
		}
	case Max:
		for i := range y {
			y[i] = max(x[i], y[i])
		}
	}
}

// foldInt is foldNum with the bitwise ops of integers.
func foldInt[T int8 | uint8 | int16 | int32 | int64](x, y []T, op Op) {
	y = y[:len(x)]
	switch op {
	case BitAnd:
		for i := range y {
			y[i] &= x[i]
		}
	case BitOr:
		for i := range y {
			y[i] |= x[i]
		}
	case BitXor:
		for i := range y {
			y[i] ^= x[i]
		}
	default:
		foldNum(x, y, op)
	}
}

// foldBool sets the bools (bytes 0 and 1) y to x op y, op as mpiOp maps
// it for bool: a logical or, and or exclusive or, bitwise on 0 and 1.
func foldBool(x, y []byte, op Op) {
	switch op {
	case Sum, Max:
		op = BitOr
	case Prod, Min:
		op = BitAnd
	}
	foldInt(x, y, op)
}
