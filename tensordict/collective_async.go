// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"runtime"

	"github.com/tdmpi/tdmpi/internal/coll"
)

// IAllReduce starts AllReduce and returns a Pending that completes it, like
// tensordict's all_reduce(async_op=True): the reduction goes on in MPI while
// the caller computes. Every rank of the group calls it, in the same order
// as its other collectives on the group.
//
// IAllReduce returns once the ranks have agreed (the structure, op and
// dtype checks of AllReduce, which need every rank to have called it): an
// error found there is returned by IAllReduce on every rank, and nothing is
// reduced. It then posts every reduction step as a nonblocking MPI
// collective (one for a consolidated storage, else one per large leaf or
// bucket of small ones) and returns. Until Wait (or a Test that reports
// completion) returns, td's tensors must be neither read nor written: the
// results, and for leaves that are not contiguous, of half precision or in
// buckets, their copy back into td, arrive only then, as does ReduceAvg's
// division. Wait is bounded by the context of WithContext as AllReduce's
// steps are (a step given up breaks the group). Several IAllReduce and
// IReduce calls may be in flight on one group at once; other collectives on
// the group may run meanwhile. A Pending dropped without Wait leaves its
// steps to MPI (see mpi.Request) and td without the results.
//
// Options: those of AllReduce.
func (td *TensorDict) IAllReduce(op ReduceOp, opts ...CollectiveOption) (*Pending, error) {
	return runCollectiveAsync("IAllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, -1, nil)
	})
}

// IReduce starts Reduce into rank dst's td and returns a Pending that
// completes it, like tensordict's reduce(async_op=True,
// return_premature=True). Its rules are those of IAllReduce; on the ranks
// other than dst, td is only read, and must not be written until Wait.
func (td *TensorDict) IReduce(dst int, op ReduceOp, opts ...CollectiveOption) (*Pending, error) {
	return runCollectiveAsync("IReduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, dst, cl.RootRange("dst", dst))
	})
}

// runCollectiveAsync is runCollective for a collective whose f defers its
// steps (see coll.Start), returning a Pending that completes them.
func runCollectiveAsync(op string, root int, bytes func(rank int) int64, o remoteOptions, f func(cl *coll.Call) error) (*Pending, error) {
	p, err := startCollective(op, root, bytes, o, true, f)
	if err != nil {
		return nil, err
	}
	pe := &Pending{c: p}
	if p.Holding() {
		// Dropped without Wait, pe leaves its steps to package mpi: the
		// storages stay held until those complete.
		runtime.AddCleanup(pe, (*coll.Pending).Drop, p)
	}
	return pe, nil
}
