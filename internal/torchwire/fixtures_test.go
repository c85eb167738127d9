// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire_test

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"slices"
	"testing"

	ogorek "github.com/kisielk/og-rek"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/torchwire"
	"github.com/tdmpi/tdmpi/internal/torchwire/wirefixture"
)

// oracle decodes p with og-rek, an independent unpickler, into plain
// values (tuples as lists), to check our decoder and encoder against.
func oracle(t *testing.T, p []byte) any {
	t.Helper()
	v, err := ogorek.NewDecoder(bytes.NewReader(p)).Decode()
	require.NoError(t, err, "og-rek")
	return plainOgorek(t, v)
}

func plainOgorek(t *testing.T, v any) any {
	switch x := v.(type) {
	case ogorek.None:
		return nil
	case ogorek.Tuple:
		return plainOgorek(t, []any(x))
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = plainOgorek(t, x[i])
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, ok := k.(string)
			require.True(t, ok, "og-rek key %T", k)
			out[s] = plainOgorek(t, e)
		}
		return out
	case *big.Int:
		require.True(t, x.IsInt64())
		return x.Int64()
	}
	return v
}

func loadCases(t testing.TB) []*wirefixture.Case {
	t.Helper()
	cases, err := wirefixture.Load()
	require.NoError(t, err)
	require.Len(t, cases, 7)
	return cases
}

// TestFixturesDecode replays every recorded message of every case: the
// length message holds the pickle's length, the pickle decodes to the
// recorded metadata (and to what og-rek decodes), and the description
// matches the TensorDict that was sent, leaf bytes included.
func TestFixturesDecode(t *testing.T) {
	for _, c := range loadCases(t) {
		for _, mode := range []string{"p2p", "bcast"} {
			t.Run(c.Name+"/"+mode, func(t *testing.T) {
				md := c.Modes[mode]
				require.NotNil(t, md)
				wm := torchwire.P2P
				if mode == "bcast" {
					wm = torchwire.Broadcast
				}
				msgs := torchwire.Messages(wm, int64(len(md.Payload[1])), int64(len(md.Payload[2])))
				require.Len(t, md.Messages, 3)
				for i, rec := range md.Messages {
					assert.Equal(t, string(msgs[i].Datatype), rec.Datatype, "message %d datatype", i)
					assert.Equal(t, msgs[i].Count, rec.Count, "message %d count", i)
					assert.Equal(t, msgs[i].Send, rec.Call, "message %d call", i)
					assert.Equal(t, torchwire.Comm, rec.Comm)
					if rec.Tag != nil {
						assert.Equal(t, torchwire.Tag, *rec.Tag)
					}
				}
				checkCalls(t, md.SenderCalls, msgs, true)
				checkCalls(t, md.ReceiverCalls, msgs, false)
				n, err := torchwire.ParseLength(md.Payload[0], 1<<30)
				require.NoError(t, err)
				require.EqualValues(t, len(md.Payload[1]), n)

				v, err := torchwire.Decode(md.Payload[1], torchwire.Limits{})
				require.NoError(t, err)
				plain, err := torchwire.Plain(v)
				require.NoError(t, err)
				assert.Equal(t, oracle(t, md.Payload[1]), plain, "og-rek disagrees")
				if md.Metadata != nil {
					assert.Equal(t, md.Metadata, plain)
				}

				m, err := torchwire.FromValue(v, mode == "bcast")
				require.NoError(t, err)
				assert.EqualValues(t, len(md.Payload[2]), m.TotalBytes)
				if mode == "bcast" {
					assert.Equal(t, "cpu", m.StorageDevice)
				}
				if c.TD.Class != "TensorDict" {
					assert.Equal(t, c.TD.Class, m.TensorclassType)
				}
				checkTD(t, &c.TD, m, md.Payload[2])
			})
		}
	}
}

// checkCalls checks a rank's recorded MPI calls against the protocol:
// MPI_Init_thread, torch 1.13's init barrier, then per message the send
// (or receive) and its MPI_Wait, or one MPI_Bcast, and MPI_Finalize.
func checkCalls(t *testing.T, calls []wirefixture.Call, msgs [3]torchwire.Message, sender bool) {
	t.Helper()
	var fns []string
	for _, c := range calls {
		fns = append(fns, c.Fn)
	}
	want := []string{"MPI_Init_thread", "MPI_Barrier"}
	var data []wirefixture.Call
	for _, m := range msgs {
		call := m.Recv
		if sender {
			call = m.Send
		}
		want = append(want, call)
		if call != "MPI_Bcast" {
			want = append(want, "MPI_Wait")
		}
	}
	want = append(want, "MPI_Finalize")
	require.Equal(t, want, fns)
	for _, c := range calls {
		if c.Fn != "MPI_Wait" && c.Fn != "MPI_Init_thread" && c.Fn != "MPI_Finalize" {
			assert.Equal(t, torchwire.Comm, c.Comm, "%s", c.Fn)
		}
		if c.Datatype != "" {
			data = append(data, c)
		}
	}
	require.Len(t, data, 3)
	for i, c := range data {
		assert.Equal(t, string(msgs[i].Datatype), c.Datatype, "call %s", c.Fn)
		assert.Equal(t, msgs[i].Count, c.Count, "call %s", c.Fn)
		if c.Tag != nil {
			assert.Equal(t, torchwire.Tag, *c.Tag)
		}
	}
}

type flatLeaf struct {
	key  []string
	leaf torchwire.Leaf
}

func flatten(n *torchwire.Node, path []string, out *[]flatLeaf) {
	for _, l := range n.Leaves {
		*out = append(*out, flatLeaf{append(append([]string(nil), path...), l.Name), l})
	}
	for _, c := range n.Children {
		flatten(c.Node, append(append([]string(nil), path...), c.Name), out)
	}
}

func findNode(n *torchwire.Node, key []string) *torchwire.Node {
	for _, k := range key {
		var next *torchwire.Node
		for _, c := range n.Children {
			if c.Name == k {
				next = c.Node
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

func names(ns []*string) []string {
	if ns == nil {
		return nil
	}
	out := make([]string, len(ns))
	for i, s := range ns {
		if s != nil {
			out[i] = *s
		}
	}
	return out
}

// checkTD compares a description with the manifest's TensorDict.
func checkTD(t *testing.T, want *wirefixture.TensorDict, m *torchwire.Meta, storage []byte) {
	t.Helper()
	assert.Equal(t, want.BatchSize, m.Root.BatchSize)
	assert.Equal(t, want.Locked, m.Root.Locked)
	if want.Names == nil {
		assert.Nil(t, m.Root.Names, "names %q", m.Root.Names)
	} else {
		assert.Equal(t, names(want.Names), m.Root.Names)
	}
	var got []flatLeaf
	flatten(&m.Root, nil, &got)
	slices.SortStableFunc(got, func(a, b flatLeaf) int { return cmp.Compare(a.leaf.Start, b.leaf.Start) })
	require.Len(t, got, len(want.Leaves))
	for i, wl := range want.Leaves {
		gl := got[i]
		assert.Equal(t, wl.Key, gl.key, "leaf %d", i)
		assert.Equal(t, wl.DType, gl.leaf.DType, "leaf %v", wl.Key)
		assert.Equal(t, wl.Shape, gl.leaf.Shape, "leaf %v", wl.Key)
		nb, ok := gl.leaf.NBytes()
		require.True(t, ok)
		require.EqualValues(t, wl.NBytes, nb)
		data := storage[gl.leaf.Start : gl.leaf.Start+nb]
		sum := sha256.Sum256(data)
		assert.Equal(t, wl.SHA256, hex.EncodeToString(sum[:]), "leaf %v bytes", wl.Key)
		if b, err := wl.Bytes(); assert.NoError(t, err) && b != nil {
			assert.Equal(t, b, data, "leaf %v bytes", wl.Key)
		}
		assert.Zero(t, gl.leaf.Start%torchwire.Alignment(gl.leaf.DType), "leaf %v alignment", wl.Key)
	}
	for _, wn := range want.Nodes {
		n := findNode(&m.Root, wn.Key)
		require.NotNil(t, n, "node %v", wn.Key)
		assert.Equal(t, wn.BatchSize, n.BatchSize, "node %v", wn.Key)
		assert.Equal(t, wn.Locked, n.Locked, "node %v", wn.Key)
		if wn.Names != nil {
			assert.Equal(t, names(wn.Names), n.Names, "node %v", wn.Key)
		}
	}
	var nts int
	for _, wnt := range want.NonTensors {
		n := findNode(&m.Root, wnt.Key[:len(wnt.Key)-1])
		require.NotNil(t, n, "non-tensor %v", wnt.Key)
		found := false
		for _, nt := range n.NonTensors {
			if nt.Name == wnt.Key[len(wnt.Key)-1] {
				found = true
				assert.Equal(t, wnt.Value, nt.Value, "non-tensor %v", wnt.Key)
				assert.Equal(t, wnt.BatchSize, nt.BatchSize, "non-tensor %v", wnt.Key)
			}
		}
		assert.True(t, found, "non-tensor %v", wnt.Key)
		nts++
	}
	assert.Equal(t, len(want.NonTensors), nts)
}

// TestFixturesEncode re-encodes every recorded description: the pickle
// decodes (with our decoder and with og-rek) to the same metadata Python
// sent, message 0 holds its length, and the counts fit torch's backend.
func TestFixturesEncode(t *testing.T) {
	for _, c := range loadCases(t) {
		for _, mode := range []string{"p2p", "bcast"} {
			t.Run(c.Name+"/"+mode, func(t *testing.T) {
				md := c.Modes[mode]
				m, err := torchwire.ParseMeta(md.Payload[1], mode == "bcast", torchwire.Limits{})
				require.NoError(t, err)
				p, err := m.Marshal(mode == "bcast")
				require.NoError(t, err)
				want := oracle(t, md.Payload[1])
				assert.Equal(t, want, oracle(t, p), "og-rek reading our pickle")
				v, err := torchwire.Decode(p, torchwire.Limits{})
				require.NoError(t, err)
				plain, err := torchwire.Plain(v)
				require.NoError(t, err)
				assert.Equal(t, want, plain)
				require.NoError(t, torchwire.CheckCounts(int64(len(p)), m.TotalBytes))
				l := torchwire.LengthMessage(int64(len(p)))
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], uint64(l[0]))
				n, err := torchwire.ParseLength(b[:], 1<<30)
				require.NoError(t, err)
				assert.EqualValues(t, len(p), n)
			})
		}
	}
}
