// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/torchwire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// WithTorch makes InitRemote and FromRemoteInit speak the wire format of
// Python tensordict's init_remote and from_remote_init over
// torch.distributed's "mpi" backend, so that the peer can be a PyTorch
// process of the same MPI job (start Go with group.WithTorchPeers):
//
//	mpirun -np 1 python3 learner.py : -np 2 ./sim
//
// Point to point, InitRemote(dst, WithTorch()) pairs with Python's
// TensorDict.from_remote_init(src=goRank) and FromRemoteInit(src,
// WithTorch()) with td.init_remote(dst=goRank); with WithBroadcast as well,
// every rank of the world takes part, like use_broadcast=True. Ranks are
// world ranks: torch talks on MPI_COMM_WORLD, so WithGroup must be the
// world group. The messages are torch's (see internal/torchwire): the
// pickle length, the metadata pickle and the consolidated storage, on tag
// 0 of MPI_COMM_WORLD, or three broadcasts.
//
// What differs from Go-to-Go transfers: the metadata is a pickle (decoded
// with a restricted unpickler that refuses anything but builtins), there is
// no private communicator and no structure check beyond what the pickle
// says, and nothing of 2 GiB or more can travel (torch counts in C ints).
// Sending, the storage is laid out as Consolidate lays it, complex128
// leaves at offsets that are multiples of 16 (torch refuses others); the
// class name travels as "_tensorclass_type" when it is a dotted Python
// name ("tensordict.testing.MyDistData"), which Python's receiver imports.
// Receiving, Python's dimension names and devices are dropped (tdmpi has
// neither), a tensorclass keeps its Python name as its class name, and
// WithMemmap is not supported.
//
// WithContext bounds each receive of a point-to-point transfer, the wait
// for its message and for the bytes of a large one (a receive under way
// when the context ends is abandoned, see ErrReceiveAbandoned); a send,
// and a broadcast, check it only before they start (a blocking MPI_Bcast
// cannot be left, and Python's receiver cannot be told that a send gave
// up).
// A point-to-point receive that refuses what the peer sent drains the rest
// of the transfer (each message awaited at most 2 s) and returns an error;
// a broadcast receiver that refuses cannot, and leaves the root's later
// broadcasts unmatched.
func WithTorch() RemoteOption { return option{kind: optTorch} }

// torchOn reports whether opts hold WithTorch.
func torchOn(opts []RemoteOption) bool {
	for _, p := range opts {
		if v, ok := p.(option); ok && v.kind == optTorch {
			return true
		}
	}
	return false
}

// torchLink is a torch-wire transfer in progress.
type torchLink struct {
	link
	world xfer.Link // the link on MPI_COMM_WORLD, where torch talks (not the library's communicator)
}

// newTorchLink resolves opts for op with peer, a world rank (the root in
// broadcast mode).
func newTorchLink(op string, peer int, dir string, opts []RemoteOption) (*torchLink, error) {
	uses := usesInitRecv
	if dir == "to" {
		uses = usesInitSend
	}
	o := resolve(opts, uses)
	if err := o.check(op); err != nil {
		return nil, err
	}
	if o.broadcast && dir == "to" {
		peer = o.group.Rank()
	}
	l, err := newLink(op, peer, dir, o)
	if err != nil {
		return nil, err
	}
	if o.broadcast {
		l.Dir = "root"
	}
	if !l.Group.IsWorld() {
		return nil, l.Errorf("WithTorch: torch's ranks talk on the world: WithGroup(%v) is not the world group", l.Group)
	}
	if l.o.memmap != "" {
		return nil, l.Errorf("WithTorch: WithMemmap is not supported")
	}
	world := l.Link
	world.Comm = l.Group.Comm()
	return &torchLink{link: l, world: world}, nil
}

func (td *TensorDict) initRemoteTorch(dst int, opts []RemoteOption) error {
	l, err := newTorchLink("InitRemote", dst, "to", opts)
	if err != nil {
		return err
	}
	if err := l.Ctx.Err(); err != nil {
		return l.Errorf("%w", err)
	}
	pickle, storage, err := torchPrepare(td, l.o.broadcast)
	if err != nil {
		return l.Errorf("%w", err)
	}
	n := torchwire.LengthMessage(int64(len(pickle)))
	mode := torchwire.P2P
	if l.o.broadcast {
		mode = torchwire.Broadcast
	}
	return proto.Exclusive(l.Group, func() error {
		for i, m := range [...]func() error{
			func() error { return l.send(n[:]) },
			func() error { return l.send(pickle) },
			func() error { return l.send(storage) },
		} {
			if err := m(); err != nil {
				return l.Errorf("%s: %w", torchwire.Messages(mode, int64(len(pickle)), int64(len(storage)))[i].What, err)
			}
		}
		return nil
	})
}

// send sends one message: point to point on tag 0, or a broadcast.
func (l *torchLink) send(b any) error {
	return l.world.SendAny(b, torchwire.Tag, l.o.broadcast)
}

// torchPrepare lays td out for Python's receiver: the metadata pickle and
// the storage, exactly as long as the pickle announces.
func torchPrepare(td *TensorDict, broadcast bool) (pickle, storage []byte, err error) {
	p, err := makePlan("InitRemote", td, 0, false)
	if err != nil {
		return nil, nil, err
	}
	if k := findStack(td, nil); k != nil {
		return nil, nil, fmt.Errorf("tensordict: InitRemote: key %v is a NonTensorStack, which tdmpi does not pickle for torch's wire format (WithTorch); it travels without WithTorch", k)
	}
	m := &torchwire.Meta{TotalBytes: int64(p.total)}
	if strings.Contains(td.class, ".") {
		m.TensorclassType = td.class
	}
	next := 0
	torchNode(&m.Root, td, p, &next)
	if pickle, err = m.Marshal(broadcast); err != nil {
		return nil, nil, err
	}
	if err := torchwire.CheckCounts(int64(len(pickle)), m.TotalBytes); err != nil {
		return nil, nil, err
	}
	if c := td.cons; c != nil && c.base == 0 && c.end == c.st.Len() && c.end == p.total && inPlannedLayout(p, c.st) {
		return pickle, c.st.Bytes(), nil
	}
	tiled := 0
	for _, l := range p.leaves {
		tiled += l.nbytes + l.pad
	}
	if tiled == p.total {
		storage = mem.AllocUninit(p.total) // pack writes every byte, pads too
	} else {
		storage = mem.Alloc(p.total) // gaps (alignment) stay zero
	}
	return pickle, storage, pack(storage, p, true)
}

// findStack returns the key of the first NonTensorStack of td, depth
// first, or nil.
func findStack(td *TensorDict, prefix Key) Key {
	for i := range td.entries {
		e := &td.entries[i]
		switch {
		case e.kind == kindNonTensor && isStack(e.v):
			return prefix.child(e.name)
		case e.kind == kindTD:
			if k := findStack(e.td, prefix.child(e.name)); k != nil {
				return k
			}
		}
	}
	return nil
}

// torchNode describes td, whose leaves are planned from p.leaves[*next] on
// in the same depth-first order, into n.
func torchNode(n *torchwire.Node, td *TensorDict, p *plan, next *int) {
	n.Cls, n.BatchSize, n.Locked = "TensorDict", td.batch, td.locked
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTensor:
			l := &p.leaves[*next]
			*next++
			n.Leaves = append(n.Leaves, torchwire.Leaf{Name: e.name, DType: l.t.DType().String(), Shape: l.t.Shape(),
				Start: int64(l.start), Stop: int64(l.start + l.nbytes + l.pad), Pad: int64(l.pad)})
		case kindNonTensor:
			n.NonTensors = append(n.NonTensors, torchwire.NonTensor{Name: e.name, Value: e.v, BatchSize: td.batch})
		case kindTD:
			c := &torchwire.Node{}
			torchNode(c, e.td, p, next)
			n.Children = append(n.Children, torchwire.Child{Name: e.name, Node: c})
		}
	}
}

// defaultTorchMaxPickle bounds the metadata pickle a receive accepts.
const defaultTorchMaxPickle = 256 << 20

func fromRemoteInitTorch(src int, opts []RemoteOption) (*TensorDict, error) {
	l, err := newTorchLink("FromRemoteInit", src, "from", opts)
	if err != nil {
		return nil, err
	}
	if l.o.broadcast && src == l.Group.Rank() {
		return nil, l.Errorf("the root of a broadcast calls InitRemote, not FromRemoteInit")
	}
	var td *TensorDict
	err = proto.Exclusive(l.Group, func() error {
		var err error
		td, err = l.recvTorch()
		return err
	})
	return td, err
}

// recvTorch receives the three messages and builds the TensorDict. A
// point-to-point transfer it refuses after a well-formed length message is
// drained: the messages Python's sender still owes (it sends all three
// whatever the receiver thinks) are received and dropped, each awaited at
// most 2 s, so that the sender is not left blocked and nothing of the
// transfer stays queued on tag 0 for a later receive.
func (l *torchLink) recvTorch() (*TensorDict, error) {
	if err := l.Ctx.Err(); err != nil {
		return nil, l.Errorf("%w", err) // a broadcast, once begun, must run to its end
	}
	var n [1]int64
	if err := l.recv(n[:], "the pickle length"); err != nil {
		return nil, err
	}
	size, err := torchwire.CheckLength(n[0], defaultTorchMaxPickle)
	if err != nil {
		return nil, l.refuse(l.Errorf("%w", err), 2)
	}
	pickle := make([]byte, size)
	if err := l.recv(pickle, "the metadata pickle"); err != nil {
		return nil, l.refuse(err, 1)
	}
	m, err := torchwire.ParseMeta(pickle, l.o.broadcast, torchwire.Limits{MaxPickle: defaultTorchMaxPickle})
	if err != nil {
		return nil, l.refuse(l.Errorf("%w", err), 1)
	}
	if lim := l.o.limits().Resolve().MaxTotal; m.TotalBytes > lim {
		return nil, l.refuse(l.Errorf("the peer announces a storage of %d bytes, over the limit of %d (WithMaxBytes)", m.TotalBytes, lim), 1)
	}
	st, err := l.torchStorage(m.TotalBytes)
	if err != nil {
		return nil, l.refuse(l.Errorf("%w", err), 1)
	}
	if err := l.recv(st.Bytes(), "the storage"); err != nil {
		return nil, err
	}
	td, err := fromTorchMeta(m, st)
	if err != nil {
		return nil, l.Errorf("%w", err)
	}
	return td, nil
}

// refuse returns err, the error of a refused transfer, after draining the
// rest messages the sender still owes when it is point to point (see
// recvTorch). A broadcast cannot be drained: the root's later broadcasts
// stay unmatched.
func (l *torchLink) refuse(err error, rest int64) error {
	if l.o.broadcast {
		return err
	}
	return errors.Join(err, l.world.DrainAny(rest, torchwire.Tag))
}

// torchStorage returns the storage of n bytes the TensorDict is built in:
// the allocator's (WithAllocator) or memory from the receive pool.
func (l *torchLink) torchStorage(n int64) (*tensor.Storage, error) {
	if l.o.alloc != nil {
		return allocatorStorage(l.o.alloc, n)
	}
	st, _, err := newRecvStorage(n) // the receive fills every byte
	return st, err
}

// recv receives one message into b, whose length is the exact count the
// protocol announces: a broadcast, or a point-to-point message from the
// peer on tag 0 matched by a xfer.Probe bounded by the context, and
// received (a byte message, such as the storage) as xfer.RecvMatched
// bounds it by the context too. A message of another size is received
// into scratch memory and refused. The broadcasts are blocking MPI_Bcast
// calls, as torch's ranks make them (a nonblocking broadcast would not
// match theirs): the context does not bound them.
func (l *torchLink) recv(b any, what string) error {
	if err := l.world.RecvAny(b, torchwire.Tag, l.o.broadcast, what, torchwire.ErrMetadata); err != nil {
		return l.Errorf("%w", err)
	}
	return nil
}

// fromTorchMeta builds the TensorDict m describes over st, with the
// checks and the builder of FromConsolidated (codec.Check, buildTree):
// every leaf a view of st.
func fromTorchMeta(m *torchwire.Meta, st *tensor.Storage) (*TensorDict, error) {
	root, err := codecNode(&m.Root, nil)
	if err != nil {
		return nil, err
	}
	if _, err := codec.Check(root, st.Len()); err != nil {
		return nil, err
	}
	td, err := buildTree(root, st, true)
	if err != nil {
		return nil, err
	}
	td.cons.base, td.cons.end = 0, st.Len()
	td.class = m.TensorclassType
	return td, nil
}

// codecNode converts a described node into the codec's tree; key is the
// node's key, for messages.
func codecNode(tn *torchwire.Node, key Key) (*codec.Node, error) {
	n := &codec.Node{Batch: tn.BatchSize, Locked: tn.Locked}
	for _, nt := range tn.NonTensors {
		v, err := canonical(nt.Value, 0)
		if err != nil {
			return nil, fmt.Errorf("non-tensor %v: %w", key.child(nt.Name), err)
		}
		n.NonTensors = append(n.NonTensors, codec.NonTensor{Name: nt.Name, Value: v})
	}
	for _, tl := range tn.Leaves {
		dt, err := tensor.ParseDType(tl.DType)
		if err != nil {
			return nil, fmt.Errorf("leaf %v: %w", key.child(tl.Name), err)
		}
		n.Leaves = append(n.Leaves, codec.Leaf{Name: tl.Name, DType: dt, Shape: tl.Shape,
			Start: int(tl.Start), Stop: int(tl.Stop), Pad: int(tl.Pad)})
	}
	for _, c := range tn.Children {
		cn, err := codecNode(c.Node, key.child(c.Name))
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, codec.Child{Name: c.Name, Node: cn})
	}
	return n, nil
}
