// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"sync"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// Receivers often get the same structure again and again (one TensorDict
// per step of a training loop, say). Decoding and validating the metadata
// JSON is then most of the cost of a small FromRemoteInit, so the last few
// decoded metadata trees are kept and reused when the same bytes arrive.
// Storage bounds are checked again for every TensorDict built.

// metaCacheSize is the number of decoded metadata trees kept.
const metaCacheSize = 8

// metaCacheMaxBytes is the largest metadata kept in the cache, so that the
// cache holds at most metaCacheSize times this much (plus the decoded
// trees): large metadata comes with transfers whose cost dwarfs decoding.
const metaCacheMaxBytes = 64 << 10

type metaCacheEntry struct {
	meta  []byte // the metadata, a private copy
	total int    // the storage size it was validated against
	root  *codec.Node
	class string
}

var metaCache struct {
	sync.Mutex
	entries [metaCacheSize]*metaCacheEntry
	next    int
}

// fromConsolidatedCached is FromConsolidated with the cache of decoded
// metadata. The result is the same: views of st, consolidated, with
// non-tensor values of its own. The cache's lock is held only to look an
// entry up and to add one: decoding and building run outside it, so
// receives on several goroutines do not wait for each other's decoding
// (entries are never changed once added, and builds only read them).
func fromConsolidatedCached(st *tensor.Storage, meta []byte) (*TensorDict, error) {
	if e := cachedMeta(st.Len(), meta); e != nil {
		td, err := buildFromMeta(e.root, st)
		if err != nil {
			return nil, err
		}
		cloneNonTensors(td)
		td.cons.base, td.cons.end = 0, st.Len()
		td.class = e.class
		return td, nil
	}
	root, class, err := codec.Decode(meta, st.Len(), codec.DefaultLimits())
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
	if len(meta) > metaCacheMaxBytes {
		return td, nil
	}
	e := &metaCacheEntry{meta: bytes.Clone(meta), total: st.Len(), root: root, class: class}
	metaCache.Lock()
	metaCache.entries[metaCache.next] = e
	metaCache.next = (metaCache.next + 1) % metaCacheSize
	metaCache.Unlock()
	return td, nil
}

// cachedMeta returns the cache's entry for meta validated against a
// storage of total bytes, or nil.
func cachedMeta(total int, meta []byte) *metaCacheEntry {
	metaCache.Lock()
	defer metaCache.Unlock()
	for _, e := range metaCache.entries {
		if e != nil && e.total == total && bytes.Equal(e.meta, meta) {
			return e
		}
	}
	return nil
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
