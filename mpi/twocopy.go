// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/internal/bytesize"
)

// twoCopyRange holds the bounds in bytes of the buffers Send passes as
// two blocks (SetTwoCopySends): more than [0], at most [1] (0: no bound);
// nil for none.
var twoCopyRange atomic.Pointer[[2]int64]

func init() {
	if s := os.Getenv("TDMPI_TWO_COPY"); s != "" {
		lo, hi, err := parseTwoCopy(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tdmpi: ignoring TDMPI_TWO_COPY: %v\n", err)
			return
		}
		SetTwoCopySends(lo, hi)
	}
}

// SetTwoCopySends makes Send pass a buffer of more than lo and at most hi
// bytes (hi 0 or less: no bound) to MPI as two blocks that are not
// adjacent in memory, its last element copied apart, and returns the
// previous bounds; lo 0 or less turns it off, the default. The
// environment variable TDMPI_TWO_COPY sets it at start ("4KiB-4MiB", or
// "4KiB" for no upper bound). The message has the same elements of the
// same datatype, and any receive takes it: this changes only how the
// sender's MPI moves it.
//
// Open MPI's shared-memory transport sends a contiguous buffer above its
// eager limit (4 KiB) with a single copy by the receiver through the
// kernel (CMA), and one that is not contiguous through fragments in
// shared memory, which the sender copies in while the receiver copies
// out. Which is faster depends on the machine: on the 2-core VM tdmpi is
// developed on, the two copies took 0.2-0.6 of the single copy's time at
// 4 KiB-16 MiB (C ping-pong of the same bytes), but tdmpi's receives into
// new memory of 16 MiB or more were slower with them; on machines with
// XPMEM or KNEM the single copy usually wins. Between nodes it makes
// little difference; MPICH's shared memory was slower with it up to 8 KiB
// and faster from 16 KiB. Measure with tdmpi bench under both before
// turning it on. Isend, Sendrecv and the collectives do not change.
//
// The two copies need sender and receiver on a core at once, fragment
// after fragment. With more ranks than cores a large message then crawls:
// with four ranks on two cores, 64 MiB receives that took under 4 s in
// all took over a minute with no upper bound. Keep the upper bound small
// (4 MiB: 128 fragments) and leave it off when ranks share cores.
func SetTwoCopySends(lo, hi int) (oldLo, oldHi int) {
	var r *[2]int64
	if lo > 0 {
		r = &[2]int64{int64(lo), int64(max(hi, 0))}
	}
	if old := twoCopyRange.Swap(r); old != nil {
		return int(old[0]), int(old[1])
	}
	return 0, 0
}

// twoCopy reports whether Send passes b as two blocks: its last element
// apart from the others.
func twoCopy(b buffer) bool {
	r := twoCopyRange.Load()
	if r == nil || b.n < 2 || b.n > math.MaxInt32 || b.size > 16 {
		return false
	}
	n := int64(b.bytes())
	return n > r[0] && (r[1] <= 0 || n <= r[1])
}

// parseTwoCopy parses the value of TDMPI_TWO_COPY, "MIN" or "MIN-MAX" with
// sizes as bytesize writes them ("4KiB-4MiB"), into the arguments of
// SetTwoCopySends.
func parseTwoCopy(s string) (lo, hi int, err error) {
	first, second, ranged := strings.Cut(s, "-")
	n, err := bytesize.Parse(strings.TrimSpace(first))
	if err != nil {
		return 0, 0, fmt.Errorf("%q: %w", s, err)
	}
	lo = int(n)
	if ranged {
		m, err := bytesize.Parse(strings.TrimSpace(second))
		if err != nil {
			return 0, 0, fmt.Errorf("%q: %w", s, err)
		}
		if hi = int(m); hi < lo {
			return 0, 0, fmt.Errorf("%q: the upper bound is below the lower", s)
		}
	}
	return lo, hi, nil
}
