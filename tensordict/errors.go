// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/coll"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
)

// Errors that the methods of TensorDict wrap, so callers can test for them
// with errors.Is.
var (
	// ErrNotFound is wrapped by errors about a key that has no entry.
	ErrNotFound = errors.New("key not found")
	// ErrLocked is wrapped by errors about adding or removing an entry of a
	// locked TensorDict.
	ErrLocked = errors.New("tensordict is locked")
	// ErrKind is wrapped by errors about an entry of the wrong kind, such as
	// Get of a nested TensorDict or GetTD of a tensor.
	ErrKind = errors.New("wrong kind of entry")
	// ErrNil is wrapped by the errors of methods called on a nil
	// *TensorDict. Methods that return no error treat a nil *TensorDict as
	// empty (Len is 0, Keys is empty) or return nil (Clone).
	ErrNil = errors.New("nil *TensorDict")
)

// ErrMismatch is matched (errors.Is) by the error of a Recv (or IRecv)
// whose TensorDict differs in structure from the sender's (keys, dtypes or
// shapes of the leaves, the consolidated layout, or the transfer mode or
// tags), and by a collective's *StructureError.
var ErrMismatch = coll.ErrMismatch

// ErrLimit is matched (errors.Is) by the error of a receive or a load
// that refused what a peer or a file announced because it exceeds a limit
// (WithMaxBytes, WithMaxMetadataBytes, WithMaxDepth, WithMaxEntries, or a
// header's own bounds), before anything was allocated for it.
var ErrLimit = wire.ErrLimit

// ErrConcurrent is matched (errors.Is) by the error of a collective on a
// group on which some rank has run two collectives at once, from two
// goroutines. MPI pairs collectives by their order on each rank, so such
// calls could combine different TensorDicts without any error: instead,
// from the first call a rank finds another one running beside it, every
// collective on that group fails on every rank (see proto.Collective)
// and moves nothing. Run concurrent collectives on groups of their own
// (group.Group.New). A rank whose goroutines happen to run one after the
// other, in an order that differs from another rank's, cannot be told
// apart from a correct program; that is MPI's own rule, which tdmpi cannot
// check.
var ErrConcurrent = coll.ErrConcurrent

// ErrNoMemory is wrapped by the error of an operation that would need more
// memory than this process can still allocate (MemAvailable of
// /proc/meminfo, lowered to the room under the process's cgroup memory
// limit), or a size that overflows an int, checked before anything is
// allocated:
//   - a receive (FromRemoteInit, Broadcast, AllGather, Scatter) whose peer
//     announces a storage that large: it fails before allocating, and the
//     sender is released as for any refused transfer;
//   - an operation whose result (or a temporary it needs) would be that
//     large, such as a Contiguous copy of a large Expand or a Consolidate:
//     the methods that return an error return it, and those whose
//     signatures have none (Clone, Contiguous, To, the Scalar forms) panic
//     with it, naming the key (see the package documentation's Errors).
//
// It is the same value as tensor.ErrNoMemory. The check is not a
// reservation: memory other processes take afterwards can still run the
// machine out.
var ErrNoMemory = mem.ErrNoMemory

// ErrReceiveAbandoned is wrapped, with the context's error, by the error of
// a receive with WithContext (FromRemoteInit, Recv, IRecv) whose context
// ended while MPI was writing a large message into its memory, as when the
// sender's link dies in the middle of the payload. A matched receive cannot
// be cancelled: it is left to MPI, which may still write that memory until
// the message completes, if ever. A storage this package allocated is
// dropped (MPI keeps it reachable until then); memory the caller owns (the
// storage of WithAllocator, the leaves of Recv's TensorDict) must not be
// read as received data or reused while MPI may write it.
var ErrReceiveAbandoned = xfer.ErrAbandoned

// ErrShared is wrapped by the error of Release on a nested TensorDict
// that shares its root's consolidated storage.
var ErrShared = errors.New("storage is shared with the TensorDict this one is nested in")

// ErrRewritten is wrapped by the error of a LoadMemmap during which the
// directory's meta.json was replaced or removed, every time it tried: a
// writer that does not take this package's lock (Python tensordict, say)
// was rewriting the directory, and what was mapped may mix two saves.
var ErrRewritten = errors.New("directory was rewritten while it was loaded")

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

// guardFault runs f, the operation op that reads or writes leaves, and
// returns f's error or, when f touched a page of a memory-mapped leaf that
// is no longer backed (a file another process truncated), an error
// wrapping memmap.ErrFault that names op, instead of the process ending
// with SIGBUS. The families of TensorDict methods that return an error go
// through it once per call: rebuild (indexed, viewed, Apply), zip (the
// element-wise, stacking and concatenating methods), eachLeaf (the
// in-place methods), and the in-place writes of SetAt, ApplyInPlace,
// Update and the comparisons. The methods that return no error use
// faultPanics instead.
func guardFault(op string, f func() error) error {
	err := mem.CatchFault(f)
	var fe *mem.FaultError
	if errors.As(err, &fe) && fe.Op == "" {
		fe.Op = "tensordict: " + op
	}
	return err
}

// guarded is guardFault for an operation that returns a result.
func guarded[T any](op string, f func() (T, error)) (T, error) {
	var out T
	err := guardFault(op, func() error {
		var err error
		out, err = f()
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// guardedWalk is walkLeaves from the root under guardFault.
func (td *TensorDict) guardedWalk(op string, fn func(k Key, node *TensorDict, j int) error) error {
	return guardFault(op, func() error { return td.walkLeaves(nil, fn) })
}
