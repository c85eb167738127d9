// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package codec

import (
	"bytes"
	"sync"
)

// Receivers often get the same structure again and again (one TensorDict
// per step of a training loop, say). Decoding and validating the metadata
// JSON is then most of the cost of a small receive, so a Cache keeps the
// last few decoded trees and returns them when the same bytes arrive for a
// storage of the same size. Storage bounds are checked again for every
// TensorDict built from a tree.

// cacheSize is the number of decoded trees a Cache keeps.
const cacheSize = 8

// CacheMaxBytes is the largest metadata a Cache keeps, so that a Cache
// holds at most cacheSize times this much (plus the decoded trees): large
// metadata comes with transfers whose cost dwarfs decoding.
const CacheMaxBytes = 64 << 10

// A Cache decodes metadata, keeping the last few results. Its zero value
// is empty and ready; it may be used from several goroutines. Its lock is
// held only to look an entry up and to add one: decoding runs outside it,
// so that receives on several goroutines do not wait for each other's
// decoding. The trees it returns are shared and must not be changed.
type Cache struct {
	mu      sync.Mutex
	entries [cacheSize]*cacheEntry
	next    int
}

type cacheEntry struct {
	meta  []byte // the metadata, a private copy
	total int    // the storage size it was validated against
	lim   Limits
	root  *Node
	class string
}

// Decode is the package's Decode, returning a kept tree when meta, stLen
// and lim are those of one it decoded before.
func (c *Cache) Decode(meta []byte, stLen int, lim Limits) (*Node, string, error) {
	if e := c.lookup(meta, stLen, lim); e != nil {
		return e.root, e.class, nil
	}
	root, class, err := Decode(meta, stLen, lim)
	if err != nil || !c.Keeps(meta) {
		return root, class, err
	}
	e := &cacheEntry{meta: bytes.Clone(meta), total: stLen, lim: lim, root: root, class: class}
	c.mu.Lock()
	c.entries[c.next] = e
	c.next = (c.next + 1) % cacheSize
	c.mu.Unlock()
	return root, class, nil
}

// Keeps reports whether c keeps the tree it decodes from meta, so that
// Decode returns the same tree (the same *Node) for meta again while it
// stays among the last few.
func (c *Cache) Keeps(meta []byte) bool { return len(meta) <= CacheMaxBytes }

func (c *Cache) lookup(meta []byte, stLen int, lim Limits) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e != nil && e.total == stLen && e.lim == lim && bytes.Equal(e.meta, meta) {
			return e
		}
	}
	return nil
}
