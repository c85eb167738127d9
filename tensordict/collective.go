package tensordict

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
)

// The collective operations (Broadcast, AllReduce, Reduce, AllGather,
// Scatter, GatherAndStack) share the plumbing of this file. Each is called
// by every rank of a group, in the same order on every rank, as MPI
// collectives are. Each runs on the group's library communicator, holding
// the group's protocol lock, so collectives of several goroutines on one
// group never interleave.
//
// None of them hangs on a rank's bad input. Anything one rank finds wrong
// before the payload moves (a leaf that cannot be reduced, a peer's header
// over the limits, a context already done, a different structure) is made
// known to every rank by a small agreement collective, and then every rank
// returns an error. Every step is waited on with the call's context (see
// collective_step.go): a rank whose peers never reach a step returns, and
// breaks the group.

// coll is one collective call in progress on one rank.
type coll struct {
	xfer.Step        // the group, its library communicator and the call's context
	op        string // the method name, for errors: "AllReduce"
	rank      int
	size      int
	lim       wire.Limits
	// consolidated is WithConsolidated: Broadcast receives into the
	// receiver's storage when the layouts match.
	consolidated bool
	// deferSteps makes the reduction, once the ranks agreed, post its steps
	// and leave them to Pending.Wait (IAllReduce, IReduce).
	deferSteps bool
	// busy reports whether another goroutine of this process runs a
	// collective on the group at the same time (group.Collective).
	busy func() bool
}

// ErrConcurrent is matched (errors.Is) by the error of a collective on a
// group on which some rank has run two collectives at once, from two
// goroutines. MPI pairs collectives by their order on each rank, so such
// calls could combine different TensorDicts without any error: instead,
// from the first call a rank finds another one running beside it, every
// collective on that group fails on every rank (see group.Group.Collective)
// and moves nothing. Run concurrent collectives on groups of their own
// (group.Group.New). A rank whose goroutines happen to run one after the
// other, in an order that differs from another rank's, cannot be told
// apart from a correct program; that is MPI's own rule, which tdmpi cannot
// check.
var ErrConcurrent = errors.New("concurrent collectives on one group")

// closeCollective ends a collective on every rank of s's group, whatever
// err (this rank's outcome) is: the ranks compare, with one small
// allreduce, whether a second goroutine came to a collective on the group
// while this one ran on any of them. If one did, MPI may have paired this
// call with another call on some rank, and every rank returns errBusy (the
// result is undefined); the agreement at the start of every later
// collective then fails too. On a group this call broke (a step given up),
// there is nothing to close: the other ranks are not at this step.
func closeCollective(s xfer.Step, busy func() bool, err error, errorf func(string, ...any) error) error {
	if errors.Is(err, group.ErrBroken) {
		return err
	}
	flag := []uint8{0}
	if busy() {
		flag[0] = 1
	}
	if aerr := xfer.Allreduce(s, flag, mpi.OpMax); aerr != nil {
		return errors.Join(err, errorf("closing the collective: %w", aerr))
	}
	if flag[0] != 0 && err == nil {
		return errorf("the result is undefined: %w", errBusy)
	}
	return err
}

// ready returns the error that stops this rank before the payload moves:
// the context's, or ErrConcurrent, or nil.
func (cl *coll) ready() error {
	if err := cl.Ctx.Err(); err != nil {
		return err
	}
	if cl.busy != nil && cl.busy() {
		return errBusy
	}
	return nil
}

var errBusy = fmt.Errorf("two goroutines of one rank have run collectives on this group at once: %w", ErrConcurrent)

// errorf returns an error "tensordict: <op>: rank <r> of <n>: <message>".
func (cl *coll) errorf(format string, args ...any) error {
	return fmt.Errorf("tensordict: %s: rank %d of %d: %w", cl.op, cl.rank, cl.size, fmt.Errorf(format, args...))
}

// wrap returns err prefixed like errorf, or nil.
func (cl *coll) wrap(err error) error {
	if err == nil {
		return nil
	}
	return cl.errorf("%w", err)
}

// checkRoot returns an error naming what if r is not a rank of the group.
// Every rank passes the same root, so every rank returns the same error.
func (cl *coll) checkRoot(what string, r int) error {
	if r < 0 || r >= cl.size {
		return cl.errorf("%s %d is out of range [0, %d) of %s", what, r, cl.size, xfer.DescribeGroup(cl.Group))
	}
	return nil
}

// runCollective checks the resolved options o, takes the group's protocol lock and runs f.
// It logs the start (with root, unless negative, and bytes(rank), when
// bytes is not nil and the line is written) and any error.
func runCollective(op string, root int, bytes func(rank int) int64, o remoteOptions, f func(cl *coll) error) error {
	if err := o.check(op); err != nil {
		return xfer.LogFailed(op, err)
	}
	g := o.group
	cl := &coll{Step: xfer.NewStep(o.ctx, g), op: op, rank: g.Rank(), size: g.Size(), lim: fullLimits(o.limits()), consolidated: o.consolidated}
	return xfer.LogFailed(op, g.Collective(func(busy func() bool) error {
		if err := g.Broken("tensordict: " + op); err != nil {
			return err
		}
		cl.busy = busy
		xfer.LogCollStart(op, g, root, bytes)
		return closeCollective(cl.Step, busy, f(cl), cl.errorf)
	}))
}

// maxReportedError bounds the text of a rank's error that agree passes to
// the other ranks.
const maxReportedError = wire.MaxReportedError

// PeerError is returned by a collective on the ranks that were ready when
// another rank of the group was not: its own error is passed to all.
type PeerError struct {
	Op   string // the collective, such as "AllReduce"
	Rank int    // the group rank that failed
	Msg  string // its error text, truncated to 1 KiB
}

// Error returns "rank <r> failed: <its error>". The collective returns it
// wrapped with its own name and rank.
func (e *PeerError) Error() string {
	return fmt.Sprintf("rank %d failed: %s", e.Rank, e.Msg)
}

// agree makes every rank learn whether some rank failed before the payload
// moved. local is this rank's own error, or nil, without the
// "tensordict: <op>" prefix. If no rank failed, agree returns nil on every
// rank. Otherwise a failing rank returns its own error and every other rank
// returns a *PeerError carrying the error text of the lowest failing rank,
// both wrapped with the op and the rank.
func (cl *coll) agree(local error) error {
	first := []int32{int32(cl.size), cl.unbounded()}
	if local != nil {
		first[0] = int32(cl.rank)
	}
	if err := xfer.Allreduce(cl.Step, first, mpi.OpMin); err != nil {
		return cl.errorf("agreeing on failures: %w", errors.Join(err, local))
	}
	cl.Agreed(first[1])
	return cl.spread(int(first[0]), local)
}

// spread returns nil if r == size (nobody failed), else passes rank r's
// error text to every rank, as agree does.
//
// The rank r comes from the other ranks. One that cannot be (below zero,
// above the group's size, or this rank while it did not fail) means that
// the ranks are not in the same collective: MPI paired this rank's
// agreement with another kind of step elsewhere (AllReduce on one rank,
// Broadcast on another). spread then breaks the group rather than go on
// with steps nobody matches, and returns an error wrapping ErrMismatch and
// group.ErrBroken.
func (cl *coll) spread(r int, local error) error {
	if r == cl.size {
		return nil
	}
	if r < 0 || r > cl.size || (r == cl.rank && local == nil) {
		cause := cl.errorf("the ranks' agreement names rank %d as failed, which cannot be: the ranks are not in the same collective (%w)", r, ErrMismatch)
		cl.Group.Break(cause)
		return fmt.Errorf("%w (%w: free the group)", cause, group.ErrBroken)
	}
	msg := make([]byte, maxReportedError)
	if r == cl.rank {
		copy(msg, local.Error())
	}
	if err := xfer.Bcast(cl.Step, msg, r); err != nil {
		return cl.errorf("passing rank %d's error: %w", r, errors.Join(err, local))
	}
	if local != nil {
		return cl.wrap(local)
	}
	return cl.errorf("%w", &PeerError{Op: cl.op, Rank: r, Msg: nulTerminated(msg)})
}

// fullLimits returns l with its unset fields at the wire defaults, so that
// they can bound FromConsolidated too.
func fullLimits(l wire.Limits) wire.Limits {
	d := wire.DefaultLimits()
	if l.MaxTotal <= 0 {
		l.MaxTotal = d.MaxTotal
	}
	if l.MaxMeta <= 0 {
		l.MaxMeta = d.MaxMeta
	}
	if l.MaxClass <= 0 {
		l.MaxClass = d.MaxClass
	}
	if l.MaxInline <= 0 {
		l.MaxInline = d.MaxInline
	}
	return l
}
