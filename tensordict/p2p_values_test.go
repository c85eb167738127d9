// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
)

// TestRecvNonTensorValues: a Recv into an existing TensorDict, per leaf
// and consolidated, takes the sender's non-tensor values: the first
// ones, a changed one (issue 43: the learner kept "A" after the actor
// sent "B"), a new key, again after the receiver changed its own, and
// those of two TensorDicts the sender alternates on one tag. Unchanged
// values travel in no message of their own: the transfers between the
// changes are the steady state's, and take the values all the same.
func TestRecvNonTensorValues(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	for _, cons := range []bool{false, true} {
		sendOpts := []SendOption{WithTag(60), testCtx(t)}
		recvOpts := []RecvOption{WithTag(60), testCtx(t)}
		if cons {
			sendOpts = append(sendOpts, WithConsolidated())
			recvOpts = append(recvOpts, WithConsolidated())
		}
		// Each step: what the sender changes before it sends, and the
		// values the receiver then holds.
		src, other := actorTD(t, 2, 4, 1), actorTD(t, 2, 4, 2)
		steps := []struct {
			name   string
			send   func() *TensorDict
			recv   func(td *TensorDict)
			env    string
			note   any
			v      float64
			noNote bool
		}{
			{name: "first", send: func() *TensorDict { require.NoError(t, src.SetNonTensor(K("env"), "A")); return src }, env: "A", v: 1, noNote: true},
			{name: "unchanged", send: func() *TensorDict { return src }, env: "A", v: 1, noNote: true},
			{name: "changed", send: func() *TensorDict { require.NoError(t, src.SetNonTensor(K("env"), "B")); return src }, env: "B", v: 1, noNote: true},
			{name: "unchanged after", send: func() *TensorDict { return src }, env: "B", v: 1, noNote: true},
			{name: "new nested key", send: func() *TensorDict {
				require.NoError(t, src.SetNonTensor(K("obs", "note"), []any{"x", int64(3)}))
				return src
			},
				env: "B", note: []any{"x", int64(3)}, v: 1},
			{name: "receiver changed its own", send: func() *TensorDict { return src },
				recv: func(td *TensorDict) { require.NoError(t, td.SetNonTensor(K("env"), "X")) }, env: "B", note: []any{"x", int64(3)}, v: 1},
			{name: "another TensorDict", send: func() *TensorDict {
				require.NoError(t, other.SetNonTensor(K("env"), "Q"))
				require.NoError(t, other.SetNonTensor(K("obs", "note"), "q"))
				return other
			}, env: "Q", note: "q", v: 2},
			{name: "the first again", send: func() *TensorDict { return src }, env: "B", note: []any{"x", int64(3)}, v: 1},
			{name: "the other again", send: func() *TensorDict { return other }, env: "Q", note: "q", v: 2},
		}
		dst := actorTD(t, 2, 4, 0)
		require.NoError(t, dst.SetNonTensor(K("env"), "Z"))
		for _, st := range steps {
			if g.Rank() == 0 {
				require.NoError(t, st.send().Send(1, sendOpts...), st.name)
				continue
			}
			if st.recv != nil {
				st.recv(dst)
			}
			_, err := dst.Recv(0, recvOpts...)
			require.NoError(t, err, st.name)
			assert.True(t, leavesAre(dst, st.v), "consolidated %v, %s", cons, st.name)
			env, err := dst.GetNonTensor(K("env"))
			require.NoError(t, err)
			assert.Equal(t, st.env, env, "consolidated %v, %s", cons, st.name)
			note, err := dst.GetNonTensor(K("obs", "note"))
			if st.noNote {
				assert.ErrorIs(t, err, ErrNotFound, "consolidated %v, %s", cons, st.name)
				continue
			}
			require.NoError(t, err, st.name)
			assert.Equal(t, st.note, note, "consolidated %v, %s", cons, st.name)
		}
	}
}
