// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
)

// Non-tensor values of Send and Recv.
//
// A Send carries the sender's metadata, non-tensor values included, with
// its first transfer of a structure to a place (a rank, a tag and a mode:
// see p2pState.described), and again after any change of the sender's
// metadata, a non-tensor value say, which rebuilds the sender's state;
// the other transfers carry the header alone. The receiver keeps, per
// group and place, the last metadata that came from there (placeSlots),
// and a Recv that succeeds gives td the non-tensor values it holds
// (takeValues): a changed value arrives with the transfer that follows
// the change, and the steady state stays one message, the receiver
// looking up its place and comparing two pointers. The values kept per place, not per
// TensorDict, serve a TensorDict that receives from several ranks
// (AnySource) or several TensorDicts that take turns receiving from one.

// placeKey is a place transfers go to or come from: the peer rank, the
// tag of their header and their mode.
type placeKey struct {
	peer    int
	tag     int
	perLeaf bool
}

// placeSlots is what a group keeps of one place: the metadata token
// (p2pState.metaTok) of the last transfer that carried metadata there
// (sent, see described), and the metadata the last transfer from there
// carried (vals, see takeValues).
type placeSlots struct {
	sent atomic.Pointer[byte]
	vals atomic.Pointer[valuesRec]
}

// places holds a group's places. A place's slots, once made, stay.
type places struct {
	mu sync.Mutex
	m  map[placeKey]*placeSlots
}

var placesOf = proto.Slot[places]{New: func() *places { return &places{m: map[placeKey]*placeSlots{}} }}

// place is a place of a group and its slots, as a transfer state keeps
// the last it looked up.
type place struct {
	g     *group.Group
	key   placeKey
	slots *placeSlots
}

// placeOf returns the slots of the place of a transfer of s with l's
// options, made if missing: a TensorDict sent or received again and again
// to and from one place looks it up once.
func (s *p2pState) placeOf(l *link) *placeSlots {
	k := placeKey{peer: l.Peer, tag: s.tag0, perLeaf: !l.o.consolidated}
	if h := &s.here; h.slots != nil && h.g == l.Group && h.key == k {
		return h.slots
	}
	p := placesOf.Of(l.Group)
	p.mu.Lock()
	slots := p.m[k]
	if slots == nil {
		slots = new(placeSlots)
		p.m[k] = slots
	}
	p.mu.Unlock()
	s.here = place{g: l.Group, key: k, slots: slots}
	return slots
}

// valuesRec is the metadata a transfer from a place carried, and the
// non-tensor values in it, decoded once (values).
type valuesRec struct {
	meta  []byte
	total int64
	once  sync.Once
	vals  []keyedValue
	err   error
}

// keyedValue is one non-tensor value of a sender's TensorDict.
type keyedValue struct {
	k Key
	v any
}

// noteValues records the metadata of a transfer from l's peer into s that
// carried it (h not described), which this side accepted: meta is its
// metadata as the header message brought it.
func (s *p2pState) noteValues(l *link, h *wire.Header, meta []byte) {
	if h.Flags&wire.FlagDescribed != 0 || len(meta) == 0 {
		return
	}
	slot := &s.placeOf(l).vals
	if cur := slot.Load(); cur != nil && cur.total == h.Total && bytes.Equal(cur.meta, meta) {
		return
	}
	slot.Store(&valuesRec{meta: bytes.Clone(meta), total: h.Total})
}

// takeValues gives td, into which a transfer from l's peer into s has just
// been received, the non-tensor values its place last sent (see the top
// of the file), unless td holds them already: s.taken is the record td
// took its values from since s was built, and a change of td's values
// rebuilds s.
func (s *p2pState) takeValues(l *link, td *TensorDict) error {
	rec := s.placeOf(l).vals.Load()
	if rec == nil || rec == s.taken {
		return nil
	}
	vals, err := rec.values()
	if err != nil {
		return fmt.Errorf("the sender's non-tensor values: %w", err)
	}
	for _, kv := range vals {
		if err := setReceivedValue(td, kv.k, kv.v); err != nil {
			return err
		}
	}
	s.taken = rec
	return nil
}

// values returns the non-tensor values of r's metadata, decoded once.
func (r *valuesRec) values() ([]keyedValue, error) {
	r.once.Do(func() {
		root, _, err := codec.Decode(r.meta, int(r.total), codec.DefaultLimits())
		if err != nil {
			r.err = err
			return
		}
		var walk func(n *codec.Node)
		walk = func(n *codec.Node) {
			for _, nt := range n.NonTensors {
				v := nt.Value
				if nt.Stack != nil {
					v = fromElements(nt.Stack.Values, nt.Stack.Shape, nil)
				}
				r.vals = append(r.vals, keyedValue{k: Key(n.Path()).child(nt.Name), v: v})
			}
			for _, c := range n.Children {
				walk(c.Node)
			}
		}
		walk(root)
	})
	return r.vals, r.err
}

// setReceivedValue sets the non-tensor value k of td to v, received, unless
// it holds an equal value already. A receive writes into a locked
// TensorDict, as it writes its tensors. A missing entry is added; a
// missing nested TensorDict, or an entry of another kind, is an error
// wrapping ErrMismatch that names the key.
func setReceivedValue(td *TensorDict, k Key, v any) error {
	node := td
	for i, name := range k[:len(k)-1] {
		j, ok := node.lookup(name)
		if !ok || node.entries[j].kind != kindTD {
			return fmt.Errorf("%w: the sender has a non-tensor value at key %v, and this side no nested TensorDict at %v to hold it", ErrMismatch, k, k[:i+1])
		}
		node = node.entries[j].td
	}
	name := k[len(k)-1]
	if j, ok := node.lookup(name); ok {
		switch e := &node.entries[j]; {
		case e.kind != kindNonTensor:
			return fmt.Errorf("%w: the sender has a non-tensor value at key %v, this side another kind of entry", ErrMismatch, k)
		case equalValues(e.v, v):
			return nil
		}
	}
	if s, ok := v.(*NonTensorStack); ok && !slices.Equal(s.shape, node.batch) {
		return fmt.Errorf("%w: the sender's non-tensor stack at key %v has shape %v, this side's batch size is %v", ErrMismatch, k, s.shape, node.batch)
	}
	node.add(name, entry{kind: kindNonTensor, v: cloneValue(v)})
	return nil
}
