// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/tensor"
)

// RemoteOption configures a communication method: InitRemote,
// FromRemoteInit, Send, Recv, ISend, IRecv and the collectives. Options a
// method has no use for are ignored by it. RemoteOptions are plain values,
// so passing them allocates nothing.
type RemoteOption struct {
	kind optKind
	g    *group.Group
	ctx  context.Context
	s    string
	n    int64
	err  error
	fn   Allocator
}

// An Allocator returns the storage of n bytes that a received TensorDict
// is built in (see WithAllocator).
type Allocator func(n int) (*tensor.Storage, error)

type optKind uint8

const (
	optNone optKind = iota
	optGroup
	optBroadcast
	optContext
	optDevice
	optMemmap
	optMaxBytes
	optTag
	optPseudoRand
	optConsolidated
	optAllocator
	optInvalid
)

// remoteOptions is the resolved form of a list of RemoteOptions.
type remoteOptions struct {
	group        *group.Group    // never nil after resolve when MPI runs
	ctx          context.Context // never nil after resolve
	broadcast    bool
	device       string
	memmap       string // file prefix for WithMemmap, "" for memory
	maxBytes     int64  // largest storage accepted from a peer, 0 for the default
	tag          int    // first per-leaf tag
	pseudoRand   bool
	consolidated bool
	alloc        Allocator // WithAllocator, nil for new heap memory
	err          error     // the first invalid option
}

func invalid(err error) RemoteOption { return RemoteOption{kind: optInvalid, err: err} }

// WithGroup makes the operation run on group g instead of the world group.
// Ranks given to the operation (dst, src, root) are then ranks of g.
func WithGroup(g *group.Group) RemoteOption {
	if g == nil {
		return invalid(errors.New("WithGroup: nil group"))
	}
	return RemoteOption{kind: optGroup, g: g}
}

// WithBroadcast makes InitRemote and FromRemoteInit use a broadcast over
// the group instead of a point-to-point message: every rank of the group
// calls one of them, the source InitRemote (its dst argument is ignored)
// and every other rank FromRemoteInit, like tensordict's use_broadcast.
func WithBroadcast() RemoteOption { return RemoteOption{kind: optBroadcast} }

// WithContext bounds the operation by ctx: a receive still waiting for its
// sender when ctx ends returns an error wrapping ctx.Err(). Messages
// already under way are completed first, so a peer is never left with
// half a transfer. Collectives check ctx only before they start.
func WithContext(ctx context.Context) RemoteOption {
	if ctx == nil {
		return invalid(errors.New("WithContext: nil context"))
	}
	return RemoteOption{kind: optContext, ctx: ctx}
}

// WithDevice names the device of received storage, as tensordict's device
// argument. Only "cpu" (or "") is supported; any other device makes the
// operation return an error.
func WithDevice(device string) RemoteOption {
	if device != "" && device != "cpu" {
		return invalid(fmt.Errorf("WithDevice: device %q is not supported, tdmpi keeps tensors on the cpu", device))
	}
	return RemoteOption{kind: optDevice, s: "cpu"}
}

// WithMemmap makes FromRemoteInit receive the storage straight into a
// memory-mapped file in the directory prefix instead of memory. See
// FromRemoteInit for the file's layout.
func WithMemmap(prefix string) RemoteOption {
	if prefix == "" {
		return invalid(errors.New("WithMemmap: empty prefix"))
	}
	return RemoteOption{kind: optMemmap, s: prefix}
}

// WithAllocator makes FromRemoteInit (both modes) build the TensorDict it
// returns in storage from alloc instead of new heap memory: alloc is called
// once per receive with the storage size, after the sender's header has
// been checked against the limits, and must return a live storage of
// exactly that many bytes, 8-byte aligned, which the receive overwrites
// whole. Its old contents and anything still viewing them are the
// caller's concern.
//
// It lets a loop reuse memory: hand back the storage of a previous result
// that is no longer used (its ConsolidatedStorage) instead of having the
// runtime find, and the kernel fault in, hundreds of megabytes for every
// receive; or receive into memory of another kind, such as
// tensor.NewOffHeapStorage's huge pages, which MPI moves faster. An error
// from alloc fails the receive (the sender is not left blocked). It cannot
// be combined with WithMemmap.
func WithAllocator(alloc Allocator) RemoteOption {
	if alloc == nil {
		return invalid(errors.New("WithAllocator: nil allocator"))
	}
	return RemoteOption{kind: optAllocator, fn: alloc}
}

// WithMaxBytes sets the largest storage, in bytes, that a receive accepts
// from a peer (default: the machine's memory, at most 64 GiB). A peer
// announcing more gets the receive an error before anything is allocated.
// A storage within the limit but beyond the memory available now is
// refused too, with an error wrapping ErrNoMemory.
func WithMaxBytes(n int64) RemoteOption {
	if n <= 0 {
		return invalid(fmt.Errorf("WithMaxBytes: %d is not positive", n))
	}
	return RemoteOption{kind: optMaxBytes, n: n}
}

// WithTag sets the tag of the first per-leaf message of Send, Recv, ISend
// and IRecv (tensordict's init_tag, default 0); later leaves use the
// following tags. With WithConsolidated it is the tag of every message.
// Tags must stay below MaxUserTag.
func WithTag(initTag int) RemoteOption {
	if initTag < 0 || initTag >= MaxUserTag {
		return invalid(fmt.Errorf("WithTag: tag %d is out of range [0, %d)", initTag, MaxUserTag))
	}
	return RemoteOption{kind: optTag, n: int64(initTag)}
}

// WithPseudoRandTags makes per-leaf messages use tensordict's pseudo-random
// tag sequence (pseudo_rand=True) instead of consecutive tags: each tag is
// IntGenerator of the previous tag plus one, starting from the WithTag tag.
func WithPseudoRandTags() RemoteOption { return RemoteOption{kind: optPseudoRand} }

// WithConsolidated makes Send, Recv, ISend and IRecv move the whole
// consolidated storage in one message (tensordict's consolidated=True)
// instead of one message per leaf. The receiver should be consolidated with
// the sender's layout, as the result of FromRemoteInit is.
func WithConsolidated() RemoteOption { return RemoteOption{kind: optConsolidated} }

// fail records the first invalid option.
func (o *remoteOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// resolveRemoteOptions applies opts over the defaults: the world group and
// a background context. The group is nil only when MPI is not running;
// check reports that and any invalid option.
func resolveRemoteOptions(opts []RemoteOption) remoteOptions {
	o := remoteOptions{ctx: context.Background()}
	for i := range opts {
		p := &opts[i]
		switch p.kind {
		case optGroup:
			o.group = p.g
		case optBroadcast:
			o.broadcast = true
		case optContext:
			o.ctx = p.ctx
		case optDevice:
			o.device = p.s
		case optMemmap:
			o.memmap = p.s
		case optMaxBytes:
			o.maxBytes = p.n
		case optTag:
			o.tag = int(p.n)
		case optPseudoRand:
			o.pseudoRand = true
		case optConsolidated:
			o.consolidated = true
		case optAllocator:
			o.alloc = p.fn
		case optInvalid:
			o.fail(p.err)
		}
	}
	if o.group == nil {
		o.group = group.World()
	}
	return o
}

// check returns an error naming op if an option was invalid or there is no
// group to run on.
func (o *remoteOptions) check(op string) error {
	if o.err != nil {
		return fmt.Errorf("tensordict: %s: %w", op, o.err)
	}
	if o.alloc != nil && o.memmap != "" {
		return fmt.Errorf("tensordict: %s: WithAllocator and WithMemmap cannot be combined", op)
	}
	if o.group == nil {
		return fmt.Errorf("tensordict: %s: %w", op, group.ErrNotInitialized)
	}
	if err := o.group.Live(op); err != nil {
		return fmt.Errorf("tensordict: %s: %w", op, err)
	}
	return nil
}

// limits returns the bounds for headers received from peers.
func (o *remoteOptions) limits() wire.Limits {
	return wire.Limits{MaxTotal: o.maxBytes}
}
