// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// link is one point-to-point or broadcast-mode operation in progress: the
// protocol's view of it (xfer.Link) and the call's resolved options.
type link struct {
	xfer.Link
	o remoteOptions
}

// newLink checks the resolved options o of op and the peer rank. It returns the
// link by value, so that the steady state of Send and Recv allocates
// nothing.
func newLink(op string, peer int, dir string, o remoteOptions) (link, error) {
	if err := o.check(op); err != nil {
		return link{}, err
	}
	l := link{Link: xfer.Link{Op: op, Group: o.group, Comm: o.group.LibComm(), Peer: peer, Dir: dir, Ctx: o.ctx}, o: o}
	if o.broadcast {
		if peer < 0 || peer >= l.Group.Size() {
			return link{}, l.Errorf("root rank %d is out of range [0, %d) of %s", peer, l.Group.Size(), xfer.DescribeGroup(l.Group))
		}
		return l, nil
	}
	switch {
	case peer < 0 || peer >= l.Group.Size():
		return link{}, l.Errorf("rank %d is out of range [0, %d) of %s", peer, l.Group.Size(), xfer.DescribeGroup(l.Group))
	case peer == l.Group.Rank():
		return link{}, l.Errorf("rank %d is the caller itself", peer)
	}
	return l, nil
}

// sendPlan is what InitRemote sends: the storage, the metadata and the
// class name of a TensorDict laid out for consolidation.
type sendPlan struct {
	class  string
	meta   []byte // metadata JSON, padded by xfer.MetaAlign
	total  int
	leaves int
	// storage is the consolidated storage when td already has one in the
	// planned layout; otherwise nil, and pack fills a buffer from p.
	storage []byte
	p       *plan
}

// planSend lays out td for sending, without copying any data.
func planSend(op string, td *TensorDict) (*sendPlan, error) {
	p, err := makePlan(op, td, 0, false)
	if err != nil {
		return nil, err
	}
	meta, err := encodeMetadata(p)
	if err != nil {
		return nil, err
	}
	sp := &sendPlan{class: td.class, total: p.total, p: p, leaves: len(p.flatten())}
	sp.meta = xfer.MetaAlign(meta, len(sp.class))
	if c := td.cons; c != nil && c.base == 0 && c.end == c.st.Len() && c.end == p.total && inPlannedLayout(p, c.st) {
		sp.storage = c.st.Bytes()
	}
	return sp, nil
}

// inPlannedLayout reports whether every leaf of p views st at its planned
// offset, so that st's bytes are the consolidated storage.
func inPlannedLayout(p *plan, st *tensor.Storage) bool {
	if st.Released() {
		return false
	}
	for _, l := range p.flatten() {
		if l.t.Storage() != st || l.t.Offset() != l.start || !l.t.IsContiguous() {
			return false
		}
	}
	return true
}

// packInto writes the consolidated storage of sp into buf (len sp.total).
func (sp *sendPlan) packInto(buf []byte) error {
	if sp.storage != nil {
		copy(buf, sp.storage)
		return nil
	}
	return pack(buf, sp.p, true)
}

// bytes returns the consolidated storage of sp, packing it if needed.
func (sp *sendPlan) bytes() ([]byte, error) {
	if sp.storage != nil {
		return sp.storage, nil
	}
	buf := mem.AllocUninit(sp.total) // pack writes every byte, pads too
	if err := pack(buf, sp.p, true); err != nil {
		return nil, err
	}
	return buf, nil
}
