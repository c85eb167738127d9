// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// metaCaches holds each group's cache of decoded metadata (codec.Cache):
// a receive of the structure it received last costs no decoding.
var metaCaches = group.Slot[codec.Cache]{New: func() *codec.Cache { return new(codec.Cache) }}

// fromConsolidatedCached is FromConsolidated with g's cache of decoded
// metadata. The result is the same: views of st, consolidated, with
// non-tensor values of its own.
func fromConsolidatedCached(g *group.Group, st *tensor.Storage, meta []byte) (*TensorDict, error) {
	root, class, err := metaCaches.Of(g).Decode(meta, st.Len(), codec.DefaultLimits())
	if err != nil {
		return nil, err
	}
	td, err := buildFromMeta(root, st)
	if err != nil {
		return nil, err
	}
	cloneNonTensors(td)
	td.cons.base, td.cons.end = 0, st.Len()
	td.class = class
	return td, nil
}

// cloneNonTensors gives td's non-tensor values copies of their own.
func cloneNonTensors(td *TensorDict) {
	for i := range td.entries {
		e := &td.entries[i]
		switch e.kind {
		case kindNonTensor:
			e.v = cloneValue(e.v)
		case kindTD:
			cloneNonTensors(e.td)
		}
	}
}
