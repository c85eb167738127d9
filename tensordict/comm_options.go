// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// Options of the communication methods come in families, one interface per
// family, so that an option a method cannot use does not compile:
//
//   - RemoteOption: InitRemote, FromRemoteInit and FromRemoteInitAs;
//   - SendOption: Send and ISend;
//   - RecvOption: Recv and IRecv;
//   - CollectiveOption: Broadcast, AllReduce, Reduce, AllGather, Scatter,
//     GatherAndStack and their nonblocking forms.
//
// An option that several families use implements several: WithGroup and
// WithContext return a CommOption, which every method takes; WithTag and
// WithPseudoRandTags a P2POption; WithMaxBytes a LimitOption (every method
// that receives a structure from a peer); WithConsolidated a PayloadOption.
// Within a family, a method refuses with an error an option that only the
// other side of the transfer uses (WithMemmap given to InitRemote,
// WithMaxBytes given to AllReduce), before anything is sent. Options are
// plain values: passing them allocates nothing.
type RemoteOption interface {
	remoteOption()
}

// SendOption configures Send and ISend. See RemoteOption for the families.
type SendOption interface {
	sendOption()
}

// RecvOption configures Recv and IRecv. See RemoteOption for the families.
type RecvOption interface {
	recvOption()
}

// CollectiveOption configures the collectives. See RemoteOption for the
// families.
type CollectiveOption interface {
	collectiveOption()
}

// CommOption is an option of every communication method (WithGroup,
// WithContext).
type CommOption interface {
	RemoteOption
	SendOption
	RecvOption
	CollectiveOption
}

// P2POption is an option of Send, Recv, ISend and IRecv (WithTag,
// WithPseudoRandTags).
type P2POption interface {
	SendOption
	RecvOption
}

// LimitOption is an option of every method that receives a structure from
// a peer: FromRemoteInit, Recv, IRecv and the collectives that return new
// TensorDicts (WithMaxBytes).
type LimitOption interface {
	RemoteOption
	RecvOption
	CollectiveOption
}

// PayloadOption is an option of the point-to-point methods and Broadcast
// (WithConsolidated).
type PayloadOption interface {
	SendOption
	RecvOption
	CollectiveOption
}

// option is the one concrete type behind every option interface; what a
// constructor declares it returns decides where it compiles.
type option struct {
	kind optKind
	n    int64 // WithMaxBytes, WithTag
	v    any   // the kind's *group.Group, context.Context, string, Allocator or error
}

func (option) remoteOption()     {}
func (option) sendOption()       {}
func (option) recvOption()       {}
func (option) collectiveOption() {}

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
	optTorch
	optInvalid
)

// optMask is a set of option kinds.
type optMask uint32

func maskOf(kinds ...optKind) optMask {
	var m optMask
	for _, k := range kinds {
		m |= 1 << k
	}
	return m
}

// optNames names each kind as its constructor, for errors.
var optNames = [...]string{
	optGroup: "WithGroup", optBroadcast: "WithBroadcast", optContext: "WithContext",
	optDevice: "WithDevice", optMemmap: "WithMemmap", optMaxBytes: "WithMaxBytes",
	optTag: "WithTag", optPseudoRand: "WithPseudoRandTags", optConsolidated: "WithConsolidated",
	optAllocator: "WithAllocator", optTorch: "WithTorch",
}

// The options each method uses; resolve refuses the others.
var (
	usesInitSend  = maskOf(optGroup, optBroadcast, optContext, optTorch)
	usesInitRecv  = maskOf(optGroup, optBroadcast, optContext, optDevice, optMemmap, optMaxBytes, optAllocator, optTorch)
	usesSend      = maskOf(optGroup, optContext, optTag, optPseudoRand, optConsolidated)
	usesRecv      = usesSend | maskOf(optMaxBytes)
	usesReduce    = maskOf(optGroup, optContext)
	usesCollRecv  = usesReduce | maskOf(optMaxBytes)
	usesBroadcast = usesCollRecv | maskOf(optConsolidated)
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
	torch        bool      // WithTorch
	seen         optMask   // the kinds given
	err          error     // the first invalid option
}

func invalid(err error) option { return option{kind: optInvalid, v: err} }

// WithGroup makes the operation run on group g instead of the world group.
// Ranks given to the operation (dst, src, root) are then ranks of g.
func WithGroup(g *group.Group) CommOption {
	if g == nil {
		return invalid(errors.New("WithGroup: nil group"))
	}
	return option{kind: optGroup, v: g}
}

// WithBroadcast makes InitRemote and FromRemoteInit use a broadcast over
// the group instead of a point-to-point message: every rank of the group
// calls one of them, the source InitRemote (its dst argument is ignored)
// and every other rank FromRemoteInit, like tensordict's use_broadcast.
func WithBroadcast() RemoteOption { return option{kind: optBroadcast} }

// WithContext bounds the operation by ctx: a receive still waiting for its
// sender when ctx ends returns an error wrapping ctx.Err(). A point-to-point
// receive already writing a large message when ctx ends (a sender that
// stalls, or whose link died, mid-payload) returns too: MPI cannot recall
// it, so the error also wraps ErrReceiveAbandoned, and the memory it was
// receiving into stays MPI's (see ErrReceiveAbandoned). A collective (and broadcast-mode InitRemote and
// FromRemoteInit) that ctx ends before it starts fails on every rank; one
// whose peers do not reach a step within a second of ctx's end abandons
// the step, returns an error wrapping ctx.Err() and group.ErrBroken, and
// leaves its group broken (see proto.Break). A send (Send, ISend's
// Wait, point-to-point InitRemote) that ctx ends before it starts sends
// nothing; one that ctx ends later returns an error wrapping ctx.Err(),
// and MPI still delivers what it had started (see Send).
func WithContext(ctx context.Context) CommOption {
	if ctx == nil {
		return invalid(errors.New("WithContext: nil context"))
	}
	return option{kind: optContext, v: ctx}
}

// WithDevice names the device of received storage, as tensordict's device
// argument. Only "cpu" (or "") is supported; any other device makes the
// operation return an error.
func WithDevice(device string) RemoteOption {
	if device != "" && device != "cpu" {
		return invalid(fmt.Errorf("WithDevice: device %q is not supported, tdmpi keeps tensors on the cpu", device))
	}
	return option{kind: optDevice, v: "cpu"}
}

// WithMemmap makes FromRemoteInit receive the storage straight into a
// memory-mapped file in the directory prefix instead of memory. See
// FromRemoteInit for the file's layout.
func WithMemmap(prefix string) RemoteOption {
	if prefix == "" {
		return invalid(errors.New("WithMemmap: empty prefix"))
	}
	return option{kind: optMemmap, v: prefix}
}

// WithAllocator makes FromRemoteInit (both modes) build the TensorDict it
// returns in storage from alloc instead of new heap memory: alloc is called
// with the storage size, after the sender's header has been checked
// against the limits, and must return a live storage of exactly that many
// bytes, 8-byte aligned, which the receive overwrites whole. Its old
// contents and anything still viewing them are the caller's concern.
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
	return option{kind: optAllocator, v: alloc}
}

// WithMaxBytes sets the largest storage, in bytes, that a receive accepts
// from a peer (default: the machine's memory, at most 64 GiB). A peer
// announcing more gets the receive an error before anything is allocated.
// A storage within the limit but beyond the memory available now is
// refused too, with an error wrapping ErrNoMemory.
func WithMaxBytes(n int64) LimitOption {
	if n <= 0 {
		return invalid(fmt.Errorf("WithMaxBytes: %d is not positive", n))
	}
	return option{kind: optMaxBytes, n: n}
}

// WithTag sets the tag of the first per-leaf message of Send, Recv, ISend
// and IRecv (tensordict's init_tag, default 0); later leaves use the
// following tags. With WithConsolidated it is the tag of every message.
// Tags must stay below MaxUserTag.
func WithTag(initTag int) P2POption {
	if initTag < 0 || initTag >= MaxUserTag {
		return invalid(fmt.Errorf("WithTag: tag %d is out of range [0, %d)", initTag, MaxUserTag))
	}
	return option{kind: optTag, n: int64(initTag)}
}

// WithPseudoRandTags makes per-leaf messages use tensordict's pseudo-random
// tag sequence (pseudo_rand=True) instead of consecutive tags: each tag is
// Python tensordict's int_generator of the previous tag plus one, bit for
// bit (numpy's default_rng(seed), eight bytes as a big-endian integer,
// modulo 10000), starting from int_generator of the WithTag tag. Chained
// from 10 it gives 6756, 1717, 4410, 9740, ...
func WithPseudoRandTags() P2POption { return option{kind: optPseudoRand} }

// WithConsolidated makes Send, Recv, ISend and IRecv move the whole
// consolidated storage in one message (tensordict's consolidated=True)
// instead of one message per leaf. The receiver should be consolidated with
// the sender's layout, as the result of FromRemoteInit is.
func WithConsolidated() PayloadOption { return option{kind: optConsolidated} }

// fail records the first invalid option.
func (o *remoteOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// apply records o in c.
func (o *option) apply(c *remoteOptions) {
	c.seen |= 1 << o.kind
	switch o.kind {
	case optGroup:
		c.group = o.v.(*group.Group)
	case optBroadcast:
		c.broadcast = true
	case optContext:
		c.ctx = o.v.(context.Context)
	case optDevice:
		c.device = o.v.(string)
	case optMemmap:
		c.memmap = o.v.(string)
	case optMaxBytes:
		c.maxBytes = o.n
	case optTag:
		c.tag = int(o.n)
	case optPseudoRand:
		c.pseudoRand = true
	case optConsolidated:
		c.consolidated = true
	case optAllocator:
		c.alloc = o.v.(Allocator)
	case optTorch:
		c.torch = true
	case optInvalid:
		c.fail(o.v.(error))
	}
}

// resolve applies opts over the defaults, the world group and a background
// context, and records as an error the first option that is not in uses.
// The group is nil only when MPI is not running; check reports that and
// any invalid option.
//
// It copies each option out of its interface rather than calling a method
// through it, so that the options of a call stay on the caller's stack.
func resolve[O any](opts []O, uses optMask) remoteOptions {
	var o remoteOptions
	resolveInto(&o, opts, uses)
	return o
}

// resolveInto is resolve writing into *o, a zero remoteOptions.
func resolveInto[O any](o *remoteOptions, opts []O, uses optMask) {
	o.ctx = context.Background()
	for _, p := range opts {
		if v, ok := any(p).(option); ok {
			v.apply(o)
		} else {
			o.fail(errors.New("nil option"))
		}
	}
	if extra := o.seen &^ (uses | 1<<optInvalid); extra != 0 {
		for k := optGroup; k < optInvalid; k++ {
			if extra&(1<<k) != 0 {
				o.fail(fmt.Errorf("%s has no use here%s", optNames[k], notHere(k, uses)))
				break
			}
		}
	}
	if o.group == nil {
		o.group = group.World()
	}
}

// notHere says where option kind k belongs, when a caller passed it to a
// method of its family that does not use it.
func notHere(k optKind, uses optMask) string {
	switch {
	case uses == usesInitSend:
		return ": it configures the receiving side (FromRemoteInit)"
	case k == optMaxBytes && uses&(1<<optMaxBytes) == 0:
		return ": this collective receives no structure from a peer"
	case k == optConsolidated:
		return ": only Broadcast and the point-to-point methods take it"
	}
	return ""
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
	if err := proto.Live(o.group, op); err != nil {
		return fmt.Errorf("tensordict: %s: %w", op, err)
	}
	return nil
}

// limits returns the bounds for headers received from peers.
func (o *remoteOptions) limits() wire.Limits {
	return wire.Limits{MaxTotal: o.maxBytes}
}

// AnySource, given as the source rank of FromRemoteInit, Recv or IRecv,
// receives from whichever rank of the group sends first, as MPI's
// MPI_ANY_SOURCE and torch.distributed's recv(src=None): the whole
// transfer (its header, metadata and payload messages) comes from that
// one rank, which Source names afterwards. It is point to point only:
// FromRemoteInit refuses it with WithBroadcast (a broadcast has a root)
// and with WithTorch, and InitRemote, Send and ISend refuse it as a
// destination. Its value is no rank, nor -1, which Source returns for a
// TensorDict nothing was received into.
//
// The header of the transfer is matched from any rank (a matched probe,
// MPI_Mprobe, which no other receive can take from under it), and the
// rest received from its sender. Until it has matched its header, a
// receive from AnySource holds the receive locks of its tags for every
// rank of the group, and IRecvs take their transfers in the order they
// were called: a Recv or IRecv from any source waits for the IRecvs
// called before it, from any rank, that share one of its tags, and a
// Recv or IRecv from one rank waits for the IRecvs from AnySource called
// before it on one of its tags. WithContext bounds every wait of it, as
// for a receive from one rank.
const AnySource = -2

// Source returns the rank of the group that the last receive into td came
// from: the sender of the TensorDict FromRemoteInit returned (the root,
// with WithBroadcast), or of the last Recv or IRecv into td that
// succeeded. It is -1 for a TensorDict nothing was received into, and for
// the nested TensorDicts of a received one. With AnySource, it names the
// rank that sent.
func (td *TensorDict) Source() int {
	if td == nil {
		return -1
	}
	return int(td.source) - 1
}

// receivedFrom records that a receive into td came from rank src, and
// returns td (nil is nothing).
func (td *TensorDict) receivedFrom(src int) *TensorDict {
	if td != nil && src >= 0 {
		td.source = int32(src + 1)
	}
	return td
}

// initAnySource checks a receive from AnySource (l.Op's) for point to
// point, and makes l's peer MPI's wildcard until its first message is
// matched (see link.recvSized).
func (l *link) initAnySource() error {
	l.Peer = xfer.AnySource
	switch {
	case l.Dir != "from":
		return l.Errorf("AnySource names no rank to send to")
	case l.o.torch:
		return l.Errorf("AnySource is not supported with WithTorch: torch's recv takes its source rank")
	}
	return nil
}

// Source returns the rank an IRecv received from once it has completed
// without error (after Wait, a Test that reported it done, or WaitAny):
// the rank it named, or the sender it matched with AnySource. It returns
// -1 before then, after an error, and for an ISend or a collective.
func (p *Pending) Source() int {
	if p == nil || p.r == nil || !p.over || p.err != nil {
		return -1
	}
	return p.r.src
}

// WaitAny waits until one of the transfers ps has completed, as MPI's
// MPI_Waitany, and returns its index in ps and its error (the error its
// Wait returns). The Pending at that index is complete: its Wait returns
// at once, and an IRecv's Source names its sender. A nil entry, or a
// Pending whose completion was already reported (by Wait, by a Test that
// returned true, or by an earlier WaitAny), is inactive and skipped, so
// that a loop can call WaitAny again after replacing the completed entry,
// with a new IRecv say, or setting it to nil. When every entry is
// inactive, WaitAny returns -1 and a nil error at once (MPI returns
// MPI_UNDEFINED).
//
// It waits as Wait does: it steps the pending IRecvs (as every receive
// of this package does) and tests the others, pausing between rounds as
// a blocking receive does: not at all for 20 us, then yielding the core,
// and from 1 ms on sleeping up to 1 ms between rounds; a round in which
// an IRecv took a message starts the pauses over. Each transfer's own
// context (WithContext) still bounds it: one whose context ends
// completes with its error, which WaitAny then returns with its index.
func WaitAny(ps []*Pending) (int, error) {
	idx, active := -1, false
	var err error
	round := func() (bool, error) {
		active = false
		moved := false
		for i, p := range ps {
			if p.inactive() {
				continue
			}
			active = true
			done := false
			if p.r != nil {
				moved = p.r.progress() || moved
				if done = p.r.over.Load(); done {
					p.endIRecv()
				}
			} else {
				done, _ = p.Test()
			}
			if done {
				idx, err = i, p.Wait() // complete: returns its result at once
				return true, nil
			}
		}
		return !active || moved, nil
	}
	for {
		// A round in which an IRecv moved returns: the pauses start over.
		_ = xfer.Poll(context.Background(), round) // its context cannot end
		if idx >= 0 || !active {
			return idx, err
		}
	}
}

// inactive reports whether p is nil or its completion has been reported
// (see WaitAny).
func (p *Pending) inactive() bool {
	switch {
	case p == nil:
		return true
	case p.c != nil:
		return p.c.Over()
	}
	return p.over
}
