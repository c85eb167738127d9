// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestInitRemoteKept: the first InitRemote of a structure to a rank
// carries its metadata, the next ones only the header and the storage
// (wire.FlagDescribed), and the receiver builds each whole; a new
// structure, a changed non-tensor value or a class name travel in full
// once; a receiver that refused the frame that kept a structure still
// reads the frames described by it; a separate payload's header is
// described too.
func TestInitRemoteKept(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	// Keys of their own: no other test kept these structures.
	small := func(label string) *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("kept", "a"), tensor.Zeros(tensor.Float32, 2, 3)))
		require.NoError(t, td.Set(K("kept", "b"), tensor.Zeros(tensor.Int64, 2)))
		require.NoError(t, td.SetNonTensor(K("kept", "label"), label))
		return td
	}
	other := func() *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("kept2"), tensor.Zeros(tensor.Float64, 2, 2)))
		return td
	}
	classed := func() *TensorDict {
		td := other()
		td.SetClassName("tdmpi.test.Kept")
		return td
	}
	large := func() *TensorDict { // a separate payload
		td := New(2)
		require.NoError(t, td.Set(K("kept3"), tensor.Zeros(tensor.Float64, 2, wire.InlineMax/8)))
		return td
	}
	mid := func() *TensorDict { // past the eager limit: the storage joins the header
		td := New(2)
		require.NoError(t, td.Set(K("kept4"), tensor.Zeros(tensor.Float64, 2, 1024)))
		return td
	}
	a, b := small("x"), other()
	full := func(td *TensorDict) int64 {
		s, err := p2pStateOf("test", td)
		require.NoError(t, err)
		defer s.mu.Unlock()
		pad := (8 - (wire.Size+len(td.class)+s.metaLen)%8) % 8
		return int64(wire.Size + len(td.class) + s.metaLen + pad + s.total)
	}
	bare := func(td *TensorDict) int64 { return int64(wire.Size) + tensorBytes(td) }
	steps := []struct {
		name   string
		td     *TensorDict
		size   func(*TensorDict) int64
		refuse bool // the receiver refuses the transfer over its limits
		label  string
	}{
		{"first", a, full, false, "x"},
		{"again", a, bare, false, "x"},
		{"new structure", b, full, false, ""},
		{"first again", a, bare, false, "x"},
		{"new value", small("y"), full, false, "y"},
		{"new value again", small("y"), bare, false, "y"},
		{"class", classed(), full, false, ""},
		{"class again", classed(), bare, false, ""},
		{"refused", small("z"), full, true, ""},
		{"after refusal", small("z"), bare, false, "z"},
		{"joined", mid(), func(td *TensorDict) int64 { return -1 }, false, ""},
		{"joined again", mid(), bare, false, ""},
		// Not consolidated: packed into a staging buffer that the next
		// transfer of the TensorDict may overwrite, so not sent in place.
		{"same TensorDict, storage apart", nil, func(*TensorDict) int64 { return wire.Size }, false, ""},
		{"separate payload", large(), func(td *TensorDict) int64 { return -1 }, false, ""},
		{"separate payload again", large(), func(*TensorDict) int64 { return wire.Size }, false, ""},
	}
	for i, st := range steps {
		if st.td == nil {
			st.td = steps[i-1].td // its second InitRemote: from its Send/Recv state
		}
		if g.Rank() == 0 {
			fill(t, st.td, float64(i))
			require.NoError(t, st.td.InitRemote(1), st.name)
			continue
		}
		want := st.size(st.td) // the receiver's copy of the sender's TensorDict
		status, err := mpi.Probe(proto.LibComm(g), 0, xfer.InitHeaderTag)
		require.NoError(t, err)
		if want >= 0 {
			assert.Equal(t, want, status.Bytes(), "%s: header message", st.name)
		}
		if st.refuse {
			_, err := FromRemoteInit(0, testCtx(t), WithMaxBytes(8))
			require.ErrorIs(t, err, wire.ErrLimit, st.name)
			continue
		}
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err, st.name)
		for _, it := range got.Items(IncludeNested(), LeavesOnly()) {
			if it.Tensor != nil {
				assert.True(t, it.Tensor.Equal(tensor.Full(it.Tensor.DType(), float64(i), it.Tensor.Shape()...)), "%s: %v", st.name, it.Key)
			}
		}
		assert.Equal(t, st.td.ClassName(), got.ClassName(), st.name)
		if st.label != "" {
			v, err := got.GetNonTensor(K("kept", "label"))
			require.NoError(t, err, st.name)
			assert.Equal(t, st.label, v, st.name)
		}
	}
}

// TestFromRemoteInitKeptHostile: frames that refer to kept structures
// wrongly are refused with wire.ErrHeader, without hanging: a ref never
// kept (after waiting keptWait for it), a header that differs from what
// its ref kept; a frame to keep is kept even when it cannot be built.
func TestFromRemoteInitKeptHostile(t *testing.T) {
	g := pairGroup(t) // what these frames keep stays there
	if g == nil {
		return
	}
	td := New(2)
	require.NoError(t, td.Set(K("hostile"), tensor.Ones(tensor.Float32, 2, 2)))
	frame, err := smallInitFrame("test", td)
	require.NoError(t, err)
	h, err := wire.Parse(frame, wire.Limits{})
	require.NoError(t, err)
	with := func(f func(h *wire.Header) []byte) []byte {
		c := h
		return f(&c)
	}
	keep := func(ref uint64, body []byte) []byte {
		return with(func(h *wire.Header) []byte {
			h.Flags |= wire.FlagKeep
			h.Ref = ref
			return append(wire.Append(nil, h), body...)
		})
	}
	described := func(ref uint64, hash uint64) []byte {
		return with(func(h *wire.Header) []byte {
			h.Flags |= wire.FlagDescribed
			h.Ref, h.Hash, h.MetaLen, h.ClassLen = ref, hash, 0, 0
			return append(wire.Append(nil, h), frame[int64(len(frame))-h.Total:]...)
		})
	}
	garbled := append([]byte(nil), frame[wire.Size:]...)
	copy(garbled, "{not json")
	steps := []struct {
		name string
		msg  []byte
		ok   bool
	}{
		{"never kept", described(1<<40, h.Hash), false},
		{"keep", keep(1<<40+1, frame[wire.Size:]), true},
		{"described", described(1<<40+1, h.Hash), true},
		{"wrong hash", described(1<<40+1, h.Hash+1), false},
		{"keep garbled", keep(1<<40+2, garbled), false},
		{"described garbled", described(1<<40+2, h.Hash), false},
	}
	for _, st := range steps {
		if g.Rank() == 0 {
			require.NoError(t, mpi.Send(proto.LibComm(g), st.msg, 1, xfer.InitHeaderTag), st.name)
			continue
		}
		got, err := FromRemoteInit(0, WithGroup(g), testCtx(t))
		if st.ok {
			require.NoError(t, err, st.name)
			assert.True(t, got.EqScalar(1).All(), st.name)
			continue
		}
		require.Error(t, err, st.name)
		if st.name != "keep garbled" && st.name != "described garbled" {
			assert.ErrorIs(t, err, wire.ErrHeader, st.name)
		}
	}
}

// TestInitRemoteKeptHeals: a receiver that lost the frame that kept a
// structure (read raw here, as a receive given up mid-message loses it)
// refuses the next frame, described by it; once xfer.KeptRenew has
// passed, the sender's next InitRemote of the structure carries the
// metadata again.
func TestInitRemoteKeptHeals(t *testing.T) {
	g := pairGroup(t)
	if g == nil {
		return
	}
	td := New(2)
	require.NoError(t, td.Set(K("heals"), tensor.Ones(tensor.Float32, 2, 2)))
	bare := int64(wire.Size) + tensorBytes(td)
	clock := newKeptClock(g)
	if g.Rank() == 0 {
		for i := range 4 {
			clock.step(t)
			if i == 2 {
				time.Sleep(xfer.KeptRenew)
			}
			require.NoError(t, td.InitRemote(1, WithGroup(g)), "InitRemote %d", i)
		}
		return
	}
	clock.step(t)
	m, st, err := mpi.Mprobe(proto.LibComm(g), 0, xfer.InitHeaderTag)
	require.NoError(t, err)
	require.Greater(t, st.Bytes(), bare, "the first InitRemote carries the metadata")
	clock.kept("heals")
	require.NoError(t, xfer.Discard(m, st.Bytes(), nil)) // lost
	for i, want := range []bool{false, true, false} {
		clock.step(t)
		st, err := mpi.Probe(proto.LibComm(g), 0, xfer.InitHeaderTag)
		require.NoError(t, err)
		full := st.Bytes() > bare
		if full != want && !(full && clock.mayRenew("heals")) {
			t.Errorf("InitRemote %d after the lost one: metadata sent %v, want %v", i, full, want)
		}
		if full {
			clock.kept("heals")
		}
		got, err := FromRemoteInit(0, WithGroup(g), testCtx(t))
		if !full && i == 0 {
			require.ErrorIs(t, err, wire.ErrHeader)
			assert.ErrorContains(t, err, "did not keep")
			continue
		}
		require.NoError(t, err, "InitRemote %d after the lost one", i)
		assert.True(t, got.EqScalar(1).All())
	}
}

// keptClock tells a receiver whether a frame it expects to be described
// by a kept structure may carry its metadata again all the same, because
// the sender found xfer.KeptRenew passed since the frame that kept it:
// on a loaded machine, steps of a test can take that long. Before each
// InitRemote both ranks call step, on which the receiver notes the time
// before a barrier: the sender's frame leaves after that time.
type keptClock struct {
	g    *group.Group
	now  time.Time            // the receiver's time at the last step
	sent map[string]time.Time // by structure: its keeping frame left after
}

func newKeptClock(g *group.Group) *keptClock {
	return &keptClock{g: g, sent: map[string]time.Time{}}
}

// step is called by both ranks before each InitRemote.
func (c *keptClock) step(t *testing.T) {
	c.now = time.Now()
	require.NoError(t, proto.LibComm(c.g).Barrier())
}

// kept notes, on the receiver, that the frame of this step carried the
// metadata of structure s, to keep.
func (c *keptClock) kept(s string) { c.sent[s] = c.now }

// mayRenew reports, on the receiver, whether the frame of structure s
// probed in this step may carry its metadata again (renewed).
func (c *keptClock) mayRenew(s string) bool {
	at, ok := c.sent[s]
	return ok && time.Since(at) >= xfer.KeptRenew
}

// pairGroup returns, on ranks 0 and 1 of the world, a group of the two of
// their own, freed when t ends, so that the structures kept on it stay
// there; nil on the other ranks.
func pairGroup(t *testing.T) *group.Group {
	w := mpitest.Need(t, 2)
	if w.Rank() > 1 {
		return nil
	}
	g, err := w.New([]int{0, 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Free()) })
	return g
}

// TestInitRemoteKeptRecord: a TensorDict sent again and again to one rank
// is described by the structure kept there (xfer.Kept), and travels in
// full, to be kept again, as soon as its ref no longer holds it: another
// eight structures took its place
// (wire.KeptRefs), its class name changed, or xfer.KeptRenew passed. The
// receiver checks the size of each header message and every element.
func TestInitRemoteKeptRecord(t *testing.T) {
	g := pairGroup(t)
	if g == nil {
		return
	}
	a := New(2)
	require.NoError(t, a.Set(K("record", "a"), tensor.Zeros(tensor.Float32, 2, 3)))
	require.NoError(t, a.Set(K("record", "b"), tensor.Zeros(tensor.Int64, 2)))
	others := make([]*TensorDict, wire.KeptRefs)
	for i := range others {
		others[i] = New()
		require.NoError(t, others[i].Set(K(fmt.Sprintf("record%d", i)), tensor.Zeros(tensor.Uint8, 8)))
	}
	const (
		full = iota // with the metadata, to be kept
		bare        // described by a kept structure
	)
	type step struct {
		name   string
		td     *TensorDict
		travel int
		before func() // on both ranks
	}
	steps := []step{
		{name: "first", td: a, travel: full},
		{name: "again", td: a, travel: bare},
		{name: "from the record", td: a, travel: bare},
	}
	for i, o := range others {
		steps = append(steps, step{name: fmt.Sprintf("other structure %d", i), td: o, travel: full})
	}
	steps = append(steps,
		step{name: "its ref taken by another", td: a, travel: full},
		step{name: "kept again", td: a, travel: bare},
		step{name: "from the new record", td: a, travel: bare},
		step{name: "class name", td: a, travel: full, before: func() { a.SetClassName("tdmpi.test.Record") }},
		step{name: "class name again", td: a, travel: bare},
		step{name: "renewal due", td: a, travel: full, before: func() {
			if g.Rank() == 0 {
				time.Sleep(xfer.KeptRenew)
			}
		}},
		step{name: "renewed", td: a, travel: bare},
		step{name: "from the renewed record", td: a, travel: bare},
	)
	clock := newKeptClock(g)
	for i, st := range steps {
		clock.step(t)
		if st.before != nil {
			st.before()
		}
		if g.Rank() == 0 {
			fill(t, st.td, float64(i))
			require.NoError(t, st.td.InitRemote(1, WithGroup(g)), st.name)
			continue
		}
		s, err := p2pStateOf("test", st.td)
		require.NoError(t, err)
		class := st.td.ClassName()
		bareLen := int64(wire.Size + s.total)
		fullLen := int64(wire.Size + len(class) + s.metaLen + (8-(wire.Size+len(class)+s.metaLen)%8)%8 + s.total)
		s.mu.Unlock()
		status, err := mpi.Probe(proto.LibComm(g), 0, xfer.InitHeaderTag)
		require.NoError(t, err)
		structure := fmt.Sprintf("%p %s", st.td, class)
		if got := status.Bytes(); st.travel == full || got != fullLen || !clock.mayRenew(structure) {
			want := map[int]int64{full: fullLen, bare: bareLen}[st.travel]
			assert.Equal(t, want, got, "%s: header message", st.name)
		}
		if status.Bytes() == fullLen {
			clock.kept(structure)
		}
		got, err := FromRemoteInit(0, WithGroup(g), testCtx(t))
		require.NoError(t, err, st.name)
		assert.Equal(t, st.td.ClassName(), got.ClassName(), st.name)
		for _, it := range got.Items(IncludeNested(), LeavesOnly()) {
			assert.True(t, it.Tensor.Equal(tensor.Full(it.Tensor.DType(), float64(i), it.Tensor.Shape()...)), "%s: %v", st.name, it.Key)
		}
	}
}
