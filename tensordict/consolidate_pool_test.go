// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/rawbytes"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/tensor"
)

// Consolidate takes its storage from the receive pool: from mem.HugeMin
// up a region on huge-page boundaries, which a release gives back at once
// when nobody saw its bytes and the next Consolidate of its size reuses,
// and which is never reused while a slice of it is reachable.
func TestConsolidatePoolStorage(t *testing.T) {
	const elems = 1<<20 + 3 // two float32 leaves: 8 MiB and a little more
	tdOf := func(v float64) *TensorDict {
		td := New()
		require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, v, elems)))
		require.NoError(t, td.Set(K("b", "c"), tensor.Full(tensor.Float32, -v, elems)))
		return td
	}
	where := func(c *TensorDict) uintptr {
		st := c.ConsolidatedStorage()
		require.NotNil(t, st)
		require.True(t, tensorx.Reusable(st), "a consolidated storage from the pool")
		b, ok := rawbytes.Of(st)
		require.True(t, ok)
		require.GreaterOrEqual(t, len(b), mem.HugeMin)
		return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	values := func(c *TensorDict) []float32 {
		x, err := c.Get(K("b", "c"))
		require.NoError(t, err)
		d, err := tensor.Data[float32](x)
		require.NoError(t, err)
		return d
	}

	one, two := tdOf(1), tdOf(2)
	c, err := one.Consolidate()
	require.NoError(t, err)
	at := where(c)
	if os.Getenv("TDMPI_HUGEPAGES") != "0" {
		require.Zero(t, at%(2<<20), "a storage of %d bytes at %#x: not on a huge-page boundary", c.ConsolidatedStorage().Len(), at)
	}

	// Released unseen: back at once, and the next one takes it.
	before := mem.Stats()
	require.NoError(t, c.Release())
	assert.Equal(t, before.GivenBack+1, mem.Stats().GivenBack, "given back by the release")
	c, err = two.Consolidate()
	require.NoError(t, err)
	assert.Equal(t, before.Reused+1, mem.Stats().Reused, "the next Consolidate reused the region")
	assert.Equal(t, at, where(c), "the next Consolidate's storage")
	d := values(c)
	assert.Equal(t, []float32{-2, -2}, []float32{d[0], d[len(d)-1]})

	// Seen: the release leaves it to the collector, and while d is
	// reachable no Consolidate writes over it.
	before = mem.Stats()
	require.NoError(t, c.Release())
	assert.Equal(t, before.GivenBack, mem.Stats().GivenBack, "a storage whose bytes were seen was given back")
	for v := range 3 {
		c3, err := tdOf(float64(10 + v)).Consolidate()
		require.NoError(t, err)
		assert.NotEqual(t, at, where(c3), "Consolidate %d reused a storage a slice still views", v)
		assert.Equal(t, []float32{-2, -2}, []float32{d[0], d[len(d)-1]}, "after Consolidate %d", v)
	}
}

// TestConsolidateRegionNotHandedOutTwice is issue 41 item 4: a second
// storage over the bytes of a live Consolidate result, released, does not
// give the result's region back to the receive pool, so the next
// Consolidate of the same size does not overwrite the first result. Only
// tdmpi's own receive and consolidated storages are the pool's
// (tensor.ReusableStorageOf, which made any bytes such a storage, is no
// longer public).
func TestConsolidateRegionNotHandedOutTwice(t *testing.T) {
	const n = 1 << 16 // 512 KiB of float64: a pool region
	first, err := New().setLeaf(t, tensor.Full(tensor.Float64, 1, n)).Consolidate()
	require.NoError(t, err)
	wrapper := tensor.StorageOf(first.ConsolidatedStorage().Bytes())
	require.NoError(t, wrapper.Release())
	second, err := New().setLeaf(t, tensor.Full(tensor.Float64, 2, n)).Consolidate()
	require.NoError(t, err)
	assert.True(t, first.EqScalar(1).All(), "the first result keeps its values")
	assert.True(t, second.EqScalar(2).All())
}
