// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// zeroedLike returns allDTypes with every leaf replaced by zeros of its
// dtype and shape: a receiver with the sender's structure and none of its
// values.
func zeroedLike(t *testing.T) *TensorDict {
	td := allDTypes(t)
	for _, it := range td.Items(IncludeNested(), LeavesOnly()) {
		if it.Tensor != nil {
			require.NoError(t, td.Set(it.Key, tensor.Zeros(it.Tensor.DType(), it.Tensor.Shape()...)))
		}
	}
	return td
}

// Every dtype, nested and awkward keys, an empty leaf and non-tensor values
// cross every point-to-point path and arrive with their bytes intact.
func TestRemoteEveryDType(t *testing.T) {
	g := mpitest.Need(t, 2)
	type path struct {
		name string
		send func(td *TensorDict) error
		recv func(t *testing.T) *TensorDict
	}
	recvInto := func(opts ...RecvOption) func(t *testing.T) *TensorDict {
		return func(t *testing.T) *TensorDict {
			td := zeroedLike(t)
			if len(opts) > 0 { // consolidated: the receiver holds one storage
				var err error
				td, err = td.Consolidate()
				require.NoError(t, err)
			}
			_, err := td.Recv(0, append(opts, testCtx(t))...)
			require.NoError(t, err)
			return td
		}
	}
	paths := []path{
		{"InitRemote", func(td *TensorDict) error { return td.InitRemote(1) },
			func(t *testing.T) *TensorDict {
				got, err := FromRemoteInit(0, testCtx(t))
				require.NoError(t, err)
				return got
			}},
		{"InitRemote broadcast", func(td *TensorDict) error { return td.InitRemote(0, WithBroadcast()) },
			func(t *testing.T) *TensorDict {
				got, err := FromRemoteInit(0, WithBroadcast(), testCtx(t))
				require.NoError(t, err)
				return got
			}},
		{"Send per leaf", func(td *TensorDict) error { return td.Send(1) }, recvInto()},
		{"Send consolidated", func(td *TensorDict) error { return td.Send(1, WithConsolidated()) }, recvInto(WithConsolidated())},
		{"ISend to IRecv", func(td *TensorDict) error {
			p, err := td.ISend(1, WithPseudoRandTags())
			if err != nil {
				return err
			}
			return p.Wait()
		}, func(t *testing.T) *TensorDict {
			td := zeroedLike(t)
			p, err := td.IRecv(0, WithPseudoRandTags(), testCtx(t))
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			return td
		}},
	}
	for _, p := range paths {
		mpitest.Run(t, p.name, func(t *testing.T) {
			want := allDTypes(t)
			switch {
			case g.Rank() == 0:
				require.NoError(t, p.send(allDTypes(t)))
			case g.Rank() == 1 || p.name == "InitRemote broadcast":
				got := p.recv(t)
				if p.name == "InitRemote" || p.name == "InitRemote broadcast" {
					// A rebuilt node lists its non-tensor values first.
					want = reordered(t, want)
				}
				// Send and Recv move tensors only: the receiver keeps its
				// own non-tensor values, which here equal the sender's.
				requireSameTD(t, want, got)
			}
		})
	}
}

// reordered returns a copy of td in the order of a TensorDict rebuilt from
// consolidated metadata (see buildFromMeta): in every node the non-tensor
// values first, then the leaves and the nested TensorDicts that hold
// leaves, in td's order, then the nested TensorDicts that hold none.
func reordered(t *testing.T, td *TensorDict) *TensorDict {
	hasLeaves := func(sub *TensorDict) bool { return len(sub.Keys(IncludeNested(), LeavesOnly())) > 0 }
	out := New(td.BatchSize()...)
	items := td.Items()
	for _, pass := range []func(Item) bool{
		func(it Item) bool { return it.IsNonTensor },
		func(it Item) bool { return it.Tensor != nil || (it.TD != nil && hasLeaves(it.TD)) },
		func(it Item) bool { return it.TD != nil && !hasLeaves(it.TD) },
	} {
		for _, it := range items {
			if !pass(it) {
				continue
			}
			switch {
			case it.IsNonTensor:
				require.NoError(t, out.SetNonTensor(it.Key, it.Value))
			case it.Tensor != nil:
				require.NoError(t, out.Set(it.Key, it.Tensor))
			default:
				require.NoError(t, out.SetTD(it.Key, reordered(t, it.TD)))
			}
		}
	}
	return out
}
