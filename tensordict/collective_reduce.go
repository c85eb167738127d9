package tensordict

import (
	"errors"

	"github.com/tdmpi/tdmpi/internal/coll"
)

// AllReduce combines the tensor leaves of td across every rank of the group
// with op, in place: afterwards every rank's leaf holds the element-wise
// sum (product, minimum, maximum) of all ranks' leaves, like tensordict's
// all_reduce. Every rank of the group calls it.
//
// The ranks must hold TensorDicts of the same structure: the same batch
// size and the same tensor leaves (keys, dtypes, shapes), in any insertion
// order: leaves are matched by key, in sorted depth-first key order.
// Non-tensor values are left alone. The structure is checked first, by
// comparing a hash of it across the ranks; if it differs, every rank
// returns a *StructureError naming the first differing key, and no leaf is
// changed.
//
// When every leaf is of one dtype and the leaves tile one storage in the
// same layout on every rank (a TensorDict returned by Consolidate,
// FromRemoteInit or Broadcast, say), the whole storage is reduced in one
// MPI call. Otherwise leaves are taken dtype by dtype, in sorted key order
// within a dtype: leaves of 256 KiB and more are reduced in place one call
// each, smaller ones are copied into buckets of up to 4 MiB, one call per
// bucket. Either way every rank makes the same calls, whatever its
// insertion order. A TensorDict reduced again and again, such as a model's
// gradients, is fastest consolidated once and then updated in place
// through its leaves: one call over a storage on huge pages (np 2 on this
// project's VM, 16 leaves and 4-8 MiB in all: 0.69-0.73x one raw
// MPI_Allreduce of heap memory, against 1.9-2.0x with each leaf in a heap
// storage of its own). Leaves that are not contiguous are reduced through a
// copy and written back; a leaf that repeats elements (an Expand result)
// is refused. Nested TensorDicts use the same group (Python tensordict's
// reduce falls back to the default group there).
//
// See ReduceOp for the dtypes each operation accepts. Options: WithGroup,
// WithContext (checked before the reduction starts; MPI cannot cancel it
// once under way).
func (td *TensorDict) AllReduce(op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("AllReduce", -1, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, -1, nil)
	})
}

// Reduce combines the tensor leaves of td across every rank of the group
// with op into dst's td, in place, like tensordict's reduce. The other
// ranks' TensorDicts are only read. dst is a rank of the group; every rank
// passes the same dst. The structure check, the order and the options are
// those of AllReduce; the structure of dst is the reference its errors
// compare with.
func (td *TensorDict) Reduce(dst int, op ReduceOp, opts ...CollectiveOption) error {
	return runCollective("Reduce", dst, td.logBytes, resolve(opts, usesReduce), func(cl *coll.Call) error {
		return reduce(cl, td, op, dst, cl.RootRange("dst", dst))
	})
}

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

// reduce runs AllReduce (root -1) or Reduce (to root). badRoot is the
// error of a root out of the group's range: this rank's failure in the
// agreement, on some ranks or all, so that no rank is left waiting for
// the others.
func reduce(cl *coll.Call, td *TensorDict, op ReduceOp, root int, badRoot error) error {
	var p *leafPlan
	local := cl.Ready()
	if badRoot != nil {
		local, root = badRoot, 0
	}
	if td == nil {
		local = errors.New("nil tensordict")
	} else {
		p = leafPlanOf(td).reduceLayout()
	}
	if local == nil {
		local = p.red.Check(coll.Op(op))
	}
	if local == nil {
		local = p.red.Hold(&cl.Held) // MPI reduces them in place
	}
	var red *coll.Reduction
	var hash uint64
	if p != nil {
		red, hash = p.red, p.hash
	}
	return cl.Reduce(red, coll.Op(op), root, local, hash, p.describe)
}

// ReduceOp is the element-wise operation AllReduce and Reduce combine the
// ranks' leaves with, like torch.distributed.ReduceOp.
//
// Sum and Prod apply to every dtype; Min and Max to every dtype but the
// complex ones. On bool leaves Sum and Max are a logical or, Prod and Min a
// logical and, as torch does. Float16 and BFloat16 have no MPI datatype:
// their leaves are widened to float32, reduced (for ReduceAvg, divided by
// the group's size and then summed) in float32, and rounded back to the
// nearest half value once, at the end (so a sum is at least as accurate as
// torch's, which accumulates in half precision, and a mean that fits in
// half precision is never lost to a sum that overflows).
type ReduceOp int

// The reduction operations. The zero value is ReduceSum, tensordict's
// default (op=None).
//
// ReduceAvg is the sum divided by the group's size, on floating-point and
// complex leaves only (an integer or bool leaf is refused on every rank
// before anything moves: torch's integer division would truncate, and
// tdmpi does not guess). Float16 and bfloat16 leaves are divided before
// the sum, in float32, and rounded once: the mean of 60000 and 60000 in
// float16 is 60000, not the +Inf of a sum rounded first, and that of 3e38
// and 3e38 in bfloat16 is 3e38. Other leaves are summed, then divided;
// with Reduce, only the destination divides them. ReduceBitAnd, ReduceBitOr and ReduceBitXor are bitwise on
// integer leaves and logical on bool leaves, as torch's BAND, BOR and BXOR;
// a floating-point leaf is refused on every rank.
const (
	ReduceSum    ReduceOp = iota // element-wise sum
	ReduceProd                   // element-wise product
	ReduceMin                    // element-wise minimum
	ReduceMax                    // element-wise maximum
	ReduceAvg                    // element-wise mean over the ranks
	ReduceBitAnd                 // bitwise (bool: logical) and
	ReduceBitOr                  // bitwise (bool: logical) or
	ReduceBitXor                 // bitwise (bool: logical) exclusive or
)

// String returns the name of o: "sum", "prod", "min", "max", "avg",
// "band", "bor" or "bxor".
func (o ReduceOp) String() string { return coll.Op(o).String() }
