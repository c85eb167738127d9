// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// roundTD returns a TensorDict of two float32 leaves of n elements each
// whose values depend on round.
func roundTD(t *testing.T, n, round int) *TensorDict {
	td := New()
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, float64(round), n)))
	require.NoError(t, td.Set(K("b", "c"), tensor.Full(tensor.Float32, float64(-round), n)))
	require.NoError(t, td.SetNonTensor(K("round"), round))
	return td
}

// recycler is an Allocator that hands back the storage of the previous
// result when it has the right size: the reuse WithAllocator is for.
type recycler struct {
	last        *tensor.Storage
	calls, hits int
}

func (r *recycler) alloc(n int) (*tensor.Storage, error) {
	r.calls++
	if r.last != nil && r.last.Len() == n {
		r.hits++
		return r.last, nil
	}
	return tensor.NewOffHeapStorage(n)
}

// FromRemoteInit with WithAllocator builds every result in the allocator's
// storage, in both modes and for inline and separate payloads, so that a
// loop reuses one storage.
func TestFromRemoteInitAllocator(t *testing.T) {
	g := mpitest.Need(t, 2)
	for _, n := range []int{4, 64 << 10} { // inline and separate payload
		for _, bcast := range []bool{false, true} {
			mpitest.Run(t, fmt.Sprintf("%d elements broadcast=%v", n, bcast), func(t *testing.T) {
				var opts []any
				if bcast {
					opts = append(opts, WithBroadcast())
				} else if g.Rank() > 1 {
					return
				}
				r := &recycler{}
				defer func() {
					if r.last != nil {
						require.NoError(t, r.last.Release())
					}
				}()
				const rounds = 4
				for round := range rounds {
					if g.Rank() == 0 {
						require.NoError(t, roundTD(t, n, round).InitRemote(1, mpitest.As[RemoteOption](opts)...))
						continue
					}
					got, err := FromRemoteInit(0, mpitest.As[RemoteOption](append(opts, testCtx(t), WithAllocator(r.alloc)))...)
					require.NoError(t, err)
					st := got.ConsolidatedStorage()
					require.NotNil(t, st)
					assert.True(t, st.IsOffHeap(), "the result lives in the allocator's storage")
					if r.last != nil {
						assert.Same(t, r.last, st, "round %d reuses the storage", round)
					}
					r.last = st
					requireSameTD(t, reordered(t, roundTD(t, n, round)), got)
				}
				if g.Rank() != 0 {
					assert.Equal(t, rounds, r.calls)
					assert.Equal(t, rounds-1, r.hits)
				}
			})
		}
	}
}

// A failing or misbehaving allocator fails the receive with an error that
// says so, and the sender is not left blocked: the next transfer works.
func TestFromRemoteInitAllocatorErrors(t *testing.T) {
	g := mpitest.Need(t, 2)
	if g.Rank() > 1 {
		return
	}
	const n = 64 << 10
	bad := []struct {
		name  string
		alloc Allocator
		want  string
	}{
		{"error", func(int) (*tensor.Storage, error) { return nil, errors.New("pool empty") }, "pool empty"},
		{"nil", func(int) (*tensor.Storage, error) { return nil, nil }, "nil storage"},
		{"short", func(n int) (*tensor.Storage, error) { return tensor.NewStorage(n - 8), nil }, "got a storage of"},
		{"released", func(n int) (*tensor.Storage, error) {
			st, err := tensor.NewOffHeapStorage(n)
			if err != nil {
				return nil, err
			}
			return st, st.Release()
		}, "released"},
	}
	for _, c := range bad {
		if g.Rank() == 0 {
			require.NoError(t, roundTD(t, n, 1).InitRemote(1), c.name)
			require.NoError(t, roundTD(t, n, 2).InitRemote(1), c.name)
			continue
		}
		_, err := FromRemoteInit(0, testCtx(t), WithAllocator(c.alloc))
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, "WithAllocator", c.name)
		got, err := FromRemoteInit(0, testCtx(t))
		require.NoError(t, err, c.name)
		requireSameTD(t, reordered(t, roundTD(t, n, 2)), got)
	}
}
