// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package codec

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheDecode(t *testing.T) {
	meta := []byte(`{"cls":"TensorDict","non_tensors":{},"leaves":{"x":["torch.float32",[2],0,8,0]},"cls_metadata":{"batch_size":[2]}}`)
	var c Cache
	first, _, err := c.Decode(meta, 8, DefaultLimits())
	require.NoError(t, err)
	again, _, err := c.Decode(meta, 8, DefaultLimits())
	require.NoError(t, err)
	assert.Same(t, first, again, "the same bytes for the same storage size give the kept tree")

	// Another storage size, or other limits, is decoded (and checked) again.
	_, _, err = c.Decode(meta, 4, DefaultLimits())
	require.Error(t, err, "a storage of 4 bytes cannot hold a leaf ending at 8")
	lim := DefaultLimits()
	lim.MaxEntries = 1
	other, _, err := c.Decode(meta, 8, lim)
	require.NoError(t, err)
	assert.NotSame(t, first, other)

	// Errors are not kept, and neither is metadata over CacheMaxBytes.
	assert.ElementsMatch(t, []int{len(meta), len(meta)}, c.kept())
	var wide strings.Builder
	wide.WriteString(`{"cls":"TensorDict","non_tensors":{},"leaves":{`)
	for i := range 2000 {
		if i > 0 {
			wide.WriteByte(',')
		}
		fmt.Fprintf(&wide, `"leaf%04d":["torch.uint8",[1],%d,%d,0]`, i, i, i+1)
	}
	wide.WriteString(`},"cls_metadata":{"batch_size":[]}}`)
	require.Greater(t, wide.Len(), CacheMaxBytes)
	_, _, err = c.Decode([]byte(wide.String()), 2000, DefaultLimits())
	require.NoError(t, err)
	for _, n := range c.kept() {
		assert.LessOrEqual(t, n, CacheMaxBytes)
	}
	assert.True(t, c.Keeps(meta))
	assert.False(t, c.Keeps([]byte(wide.String())), "Keeps says what Decode keeps")
}

// TestCacheConcurrent decodes from several goroutines at once (run with
// -race): every result is right whatever the interleaving.
func TestCacheConcurrent(t *testing.T) {
	var c Cache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := (g + i) % 12
				meta := fmt.Appendf(nil, `{"cls":"TensorDict","non_tensors":{},"leaves":{},"cls_metadata":{"batch_size":[%d]}}`, n)
				root, _, err := c.Decode(meta, 0, DefaultLimits())
				if !assert.NoError(t, err) || !assert.Equal(t, []int{n}, root.Batch) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// kept returns the sizes of the metadata c holds.
func (c *Cache) kept() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n []int
	for _, e := range c.entries {
		if e != nil {
			n = append(n, len(e.meta))
		}
	}
	return n
}
