// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import (
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectUntil runs the collector until cond holds (finalizers run on
// their own goroutine, after a collection) or 3 s pass, and reports
// whether it held.
func collectUntil(cond func() bool) bool {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
		if cond() {
			return true
		}
	}
	return cond()
}

// testPool returns a new pool that keeps up to limit bytes. It nudges
// the collector only once nudgeMin (64 MiB) of its regions are out: the
// tests that want no nudge stay under that, those that want one ask for
// regions of nudgeMin.
func testPool(t *testing.T, limit int64) *pool {
	t.Helper()
	p := newPool()
	p.limit = limit
	return p
}

func TestRecvSmallIsNotPooled(t *testing.T) {
	before := Stats()
	b, err := Recv(PoolMin - 8)
	require.NoError(t, err)
	require.Len(t, b, PoolMin-8)
	require.Zero(t, addr(b)%8)
	require.Equal(t, before.Fresh, Stats().Fresh)
}

func TestPoolReusesUnreachableRegion(t *testing.T) {
	for _, n := range []int{5<<20 + 3, 200<<10 + 3} { // huge-page and smaller regions
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			p := testPool(t, 1<<30)
			b, err := p.get(n)
			require.NoError(t, err)
			require.Len(t, b, n)
			require.Equal(t, n, cap(b), "the slice must not reach the region's tail")
			require.Zero(t, addr(b)%8)
			a := addr(b)
			b[0], b[n-1] = 1, 2
			b = nil
			require.True(t, collectUntil(func() bool { return p.snapshot().Returned == 1 }), "the dropped region never came back")
			s := p.snapshot()
			require.Equal(t, int64(regionSize(n)), s.Idle)
			require.Zero(t, s.Out)
			// Any size of the same region size reuses it.
			b2, err := p.get(n - 1000)
			require.NoError(t, err)
			require.Equal(t, a, addr(b2))
			require.Equal(t, int64(1), p.snapshot().Reused)
			runtime.KeepAlive(b2)
		})
	}
}

// TestPoolNeverReusesReachableRegion: whatever still points into a region
// (the whole slice, a piece of it, a pointer to one element) keeps it
// from being handed out again.
func TestPoolNeverReusesReachableRegion(t *testing.T) {
	const n = 6 << 20
	for _, tc := range []struct {
		name string
		keep func(b []byte) any
	}{
		{"whole slice", func(b []byte) any { return b }},
		{"first bytes", func(b []byte) any { return b[:1] }},
		{"interior piece", func(b []byte) any { return b[3<<20 : 3<<20+8] }},
		{"last byte", func(b []byte) any { return b[n-1:] }},
		{"pointer to an element", func(b []byte) any { return &b[4<<20] }},
		{"typed view", func(b []byte) any { return unsafe.Slice((*float64)(unsafe.Pointer(&b[8])), 16) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPool(t, 1<<30)
			b, err := p.get(n)
			require.NoError(t, err)
			a := addr(b)
			kept := tc.keep(b)
			b = nil
			for range 4 {
				runtime.GC()
				time.Sleep(2 * time.Millisecond)
			}
			require.Zero(t, p.snapshot().Returned, "a region came back while a reference to it was reachable")
			b2, err := p.get(n)
			require.NoError(t, err)
			require.NotEqual(t, a, addr(b2))
			runtime.KeepAlive(kept)
			kept = nil
			require.True(t, collectUntil(func() bool { return p.snapshot().Returned >= 1 }), "the region never came back once its last reference was dropped")
			runtime.KeepAlive(b2)
		})
	}
}

func TestPoolLimitDropsRegions(t *testing.T) {
	p := testPool(t, 0)
	_, err := p.get(PoolMin) // dropped at once
	require.NoError(t, err)
	require.True(t, collectUntil(func() bool { return p.snapshot().Returned == 1 }))
	s := p.snapshot()
	require.Equal(t, int64(1), s.Dropped)
	require.Zero(t, s.Idle)

	p.setLimit(1 << 30)
	_, err = p.get(PoolMin)
	require.NoError(t, err)
	require.True(t, collectUntil(func() bool { return p.snapshot().Idle > 0 }))
	require.Equal(t, int64(1<<30), p.setLimit(0))
	require.Zero(t, p.snapshot().Idle, "lowering the limit must drop what is over it")
}

// Regions under HugeMin wait in the pool up to smallIdleMax bytes, huge
// ones up to the pool's limit alone.
func TestPoolBoundsSmallIdle(t *testing.T) {
	const small, huge = 2 << 20, HugeMin // regions of 2 and 4 MiB (never written: no memory)
	fit := int(smallIdleMax) / regionSize(small)
	require.Equal(t, smallIdleMax, int64(fit*regionSize(small)), "small regions fill smallIdleMax exactly")
	p := testPool(t, 1<<30)
	var got [][]byte // all new regions: none comes back before the last is made
	for _, n := range append(slices.Repeat([]int{small}, fit+1), huge, huge) {
		b, err := p.get(n)
		require.NoError(t, err)
		got = append(got, b)
	}
	runtime.KeepAlive(got) // dropped from here on
	require.Equal(t, int64(fit+3), p.snapshot().Fresh)
	require.True(t, collectUntil(func() bool { return p.snapshot().Returned == int64(fit+3) }), "the dropped regions never came back")
	s := p.snapshot()
	assert.Equal(t, int64(1), s.Dropped, "the last small region is over smallIdleMax")
	assert.Equal(t, smallIdleMax+2*int64(regionSize(huge)), s.Idle)
	assert.Equal(t, smallIdleMax, p.idleSmall)
	// A region of another size that comes back takes the place of the
	// one that waited longest.
	const other = 1 << 20 // a smaller region, so that one drop makes room
	_, err := p.get(other)
	require.NoError(t, err)
	require.True(t, collectUntil(func() bool { return p.snapshot().Returned == int64(fit+4) }), "the dropped region never came back")
	s = p.snapshot()
	assert.Equal(t, int64(2), s.Dropped, "the region that waited longest makes room")
	assert.Equal(t, int64((fit-1)*regionSize(small)+regionSize(other)), p.idleSmall)
	b, err := p.get(other)
	require.NoError(t, err)
	assert.Equal(t, int64(1), p.snapshot().Reused, "the newest region is kept")
	runtime.KeepAlive(b)
	var kept [][]byte
	for range fit - 1 {
		b2, err := p.get(small)
		require.NoError(t, err)
		kept = append(kept, b2)
	}
	assert.Equal(t, int64(fit), p.snapshot().Reused, "the small regions wait in the pool")
	runtime.KeepAlive(kept)
	assert.Zero(t, p.idleSmall, "taking small regions must count them out")
}

// A region that came back arms the timer that drops idle regions, which
// drops it once it has waited poolIdle, not before, and stops with the
// pool empty.
func TestPoolDropsIdleRegions(t *testing.T) {
	p := testPool(t, 1<<30)
	_, err := p.get(PoolMin) // dropped at once
	require.NoError(t, err)
	require.True(t, collectUntil(func() bool { return p.snapshot().Returned == 1 }))
	p.mu.Lock()
	timer := p.timer
	since := p.free[regionSize(PoolMin)][0].since
	p.mu.Unlock()
	require.NotNil(t, timer, "no timer to drop the idle region")
	t.Cleanup(func() { timer.Stop() })
	p.dropIdleAt(since.Add(poolIdle - time.Millisecond))
	s := p.snapshot()
	require.Equal(t, int64(regionSize(PoolMin)), s.Idle, "dropped before it waited poolIdle")
	require.Zero(t, s.Dropped)
	p.dropIdleAt(since.Add(poolIdle))
	s = p.snapshot()
	require.Zero(t, s.Idle)
	require.Equal(t, int64(1), s.Dropped)
	p.mu.Lock()
	assert.Nil(t, p.timer, "the timer runs on with nothing to drop")
	p.mu.Unlock()
}

func TestPoolNudgesCollector(t *testing.T) {
	const n = int(nudgeMin) // with this region out, the next request may nudge (never written: no memory)
	p := testPool(t, 1<<30)
	b, err := p.get(n)
	require.NoError(t, err)
	a := addr(b)
	b = nil
	// No collection here: the request must run it itself.
	b2, err := p.get(n)
	require.NoError(t, err)
	s := p.snapshot()
	require.Equal(t, int64(1), s.Nudges)
	if s.Reused == 0 {
		t.Skipf("the finalizer did not run within %v of the nudge (loaded machine?): the rest needs it", nudgeWait)
	}
	require.Equal(t, a, addr(b2))
	// b2 is reachable: the next request nudges in vain, and the one after
	// does not nudge, until twice as many bytes are out.
	nudges := s.Nudges
	b3, err := p.get(n)
	require.NoError(t, err)
	require.Equal(t, nudges+1, p.snapshot().Nudges)
	b4, err := p.get(n)
	require.NoError(t, err)
	require.Equal(t, nudges+1, p.snapshot().Nudges)
	runtime.KeepAlive(b2)
	runtime.KeepAlive(b3)
	runtime.KeepAlive(b4)
}

// collecting reports whether a collection that p started runs.
func collecting(p *pool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done != nil
}

// Settle returns at once when no collection runs, and once the running
// one (and its rerun for a release during it) has ended otherwise.
func TestPoolSettle(t *testing.T) {
	p := testPool(t, 1<<30)
	p.settle()
	p.mu.Lock()
	p.collect()
	p.mu.Lock()
	p.again = p.done != nil // a release during the collection: it runs twice
	p.mu.Unlock()
	p.settle()
	assert.False(t, collecting(p))
	p.mu.Lock()
	assert.False(t, p.again, "settled before the rerun")
	p.mu.Unlock()
}

// A receive that took the last free region starts a collection when it
// hands its result over (received), so that the result the caller drops
// then comes back before its next receive, which takes it without a
// nudge. A collection that brings nothing back is not repeated until
// twice as many bytes are out.
func TestPoolCollectsAfterReceive(t *testing.T) {
	const n = int(nudgeMin) // past collectMin, and out, it lets the next request nudge (never written: no memory)
	p := testPool(t, 1<<30)
	a, err := p.get(n)
	require.NoError(t, err)
	p.received() // a is the caller's: nothing comes back
	p.settle()
	p.mu.Lock()
	require.Equal(t, 2*p.out, p.collectAt)
	p.mu.Unlock()
	p.received()
	require.Nil(t, p.done, "no second collection before twice as many bytes are out")

	b, err := p.get(n) // nudges in vain: a is still the caller's
	require.NoError(t, err)
	was := addr(a)
	a = nil // the caller drops the result before last
	runtime.KeepAlive(a)
	p.received()
	p.settle()
	// The collection received started, no other, brings a back (its
	// finalizer runs on a goroutine of its own, soon after).
	for i := 0; i < 1000 && p.snapshot().Returned == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, int64(1), p.snapshot().Returned, "a came back")
	s := p.snapshot()
	c, err := p.get(n)
	require.NoError(t, err)
	assert.Equal(t, was, addr(c), "the region the caller dropped")
	assert.Equal(t, s.Nudges, p.snapshot().Nudges, "no nudge")
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
}

func TestRecvNegative(t *testing.T) {
	_, err := Recv(-1)
	require.Error(t, err)
}

func TestRegionSize(t *testing.T) {
	tests := []struct{ n, want int }{
		{PoolMin, 4 << 10},
		{5000, 5 << 10},
		{40 << 10, 40 << 10},
		{40<<10 + 1, 48 << 10},
		{64 << 10, 64 << 10},
		{64<<10 + 1, 80 << 10},
		{256 << 10, 256 << 10},
		{300 << 10, 320 << 10},
		{HugeMin - 1, HugeMin},
		{HugeMin, HugeMin},
		{HugeMin + 1, HugeMin + hugePage},
		{256 << 20, 256 << 20},
	}
	for _, tt := range tests {
		got := regionSize(tt.n)
		assert.Equal(t, tt.want, got, "regionSize(%d)", tt.n)
		assert.GreaterOrEqual(t, got, tt.n)
		assert.LessOrEqual(t, float64(got), 1.25*float64(tt.n)+hugePage, "regionSize(%d) wastes too much", tt.n)
	}
}

// waitReturned waits up to a second for the pool's Returned count to reach
// n (finalizers run on a goroutine of their own, after the collection that
// found their objects) and reports whether it did.
func waitReturned(p *pool, n int64) bool {
	for i := 0; i < 1000 && p.snapshot().Returned < n; i++ {
		time.Sleep(time.Millisecond)
	}
	return p.snapshot().Returned >= n
}

// A released storage (Dropped) starts the collection that brings its
// region back, without waiting for a receive, and one running since before
// the release (started by Received while the result was the caller's)
// runs again: the next request takes the region without a nudge.
func TestPoolDropped(t *testing.T) {
	const n = int(dropMin) // the smallest region whose release collects
	p := testPool(t, 1<<30)

	t.Run("idle", func(t *testing.T) {
		a, err := p.get(n)
		require.NoError(t, err)
		was := addr(a)
		a = nil // the caller released it
		runtime.KeepAlive(a)
		p.dropped(n)
		require.True(t, collecting(p), "no collection started")
		p.settle()
		require.True(t, waitReturned(p, 1), "the released region never came back")
		s := p.snapshot()
		b, err := p.get(n)
		require.NoError(t, err)
		assert.Equal(t, was, addr(b))
		assert.Equal(t, s.Reused+1, p.snapshot().Reused)
		a = b
		runtime.KeepAlive(a)
	})

	t.Run("running", func(t *testing.T) {
		returned := p.snapshot().Returned
		a, err := p.get(n)
		require.NoError(t, err)
		require.Len(t, a, n)
		// A collection that starts while a is still referenced ...
		p.mu.Lock()
		p.collect()
		a = nil
		runtime.KeepAlive(a)
		// ... runs again for the release during it.
		p.dropped(n)
		p.settle()
		require.True(t, waitReturned(p, returned+1), "the region released during a collection never came back")
		p.mu.Lock()
		assert.False(t, p.again)
		p.mu.Unlock()
	})

	t.Run("free", func(t *testing.T) {
		// A region of the size waits: nothing to collect for.
		require.NotZero(t, p.snapshot().Idle)
		p.dropped(n)
		assert.False(t, collecting(p))
	})

	t.Run("small", func(t *testing.T) {
		p.dropped(PoolMin - 1)
		assert.False(t, collecting(p))
	})

	t.Run("under dropMin", func(t *testing.T) {
		// Between collectMin and dropMin, Received's collections serve.
		const m = 1 << 20
		require.True(t, m >= collectMin && m < dropMin)
		_, err := p.get(m)
		require.NoError(t, err)
		p.dropped(m)
		assert.False(t, collecting(p))
	})
}

// Released regions under collectMin do not start a collection each (one
// per receive costs more than it saves), but every smallCollect bytes of
// them do: they come back.
func TestPoolCollectsSmallRegions(t *testing.T) {
	const n = 128 << 10 // under collectMin
	count := int(smallCollect) / regionSize(n)
	require.Equal(t, smallCollect, int64(count*regionSize(n)), "regions of n make smallCollect exactly")
	p := testPool(t, 1<<30)
	var was []uintptr
	var held [][]byte // all new regions: none comes back before the last is made
	for range count {
		b, err := p.get(n)
		require.NoError(t, err)
		p.received()
		require.False(t, collecting(p), "a collection for a region under collectMin")
		was = append(was, addr(b))
		held = append(held, b)
	}
	runtime.KeepAlive(held) // the caller releases them from here on
	require.Equal(t, int64(count), p.snapshot().Fresh)
	for i := range count {
		require.False(t, collecting(p), "a collection before smallCollect bytes were released")
		p.dropped(n)
		if i < count-1 {
			continue
		}
		require.True(t, collecting(p), "no collection after smallCollect bytes")
	}
	p.settle()
	require.True(t, waitReturned(p, int64(count)), "the released regions never came back")
	p.mu.Lock()
	assert.Zero(t, p.smallDropped)
	p.mu.Unlock()
	var kept [][]byte
	for range count {
		b, err := p.get(n)
		require.NoError(t, err)
		assert.Contains(t, was, addr(b))
		kept = append(kept, b)
	}
	runtime.KeepAlive(kept)
}

// After spareAfter requests of one size got their region by waiting for a
// collection, the next takes a new one, so that one more region of the
// size goes round and the waits stop.
func TestPoolSpareAfterWaits(t *testing.T) {
	const n = int(nudgeMin) // with this region out, the next request may nudge (never written: no memory)
	p := testPool(t, 1<<30)
	a, err := p.get(n)
	require.NoError(t, err)
	require.Len(t, a, n)
	for i := range spareAfter {
		a = nil // dropped just before the next request
		runtime.KeepAlive(a)
		a, err = p.get(n)
		require.NoError(t, err)
		require.Len(t, a, n)
		s := p.snapshot()
		require.Equal(t, int64(i+1), s.Nudges, "request %d did not wait for the dropped region", i+1)
		require.Equal(t, int64(1), s.Fresh)
	}
	a = nil
	runtime.KeepAlive(a)
	a, err = p.get(n)
	require.NoError(t, err)
	s := p.snapshot()
	assert.Equal(t, int64(spareAfter), s.Nudges, "waited again")
	assert.Equal(t, int64(2), s.Fresh, "no second region")
	// One spare only: the waits go on (every other request here), as a
	// loop that needs a collection whatever the number of regions would
	// have them.
	nudges := p.snapshot().Nudges
	for range 4 * spareAfter {
		a = nil
		runtime.KeepAlive(a)
		a, err = p.get(n)
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, p.snapshot().Nudges-nudges, int64(spareAfter+1), "too few waits to test")
	assert.Equal(t, int64(2), p.snapshot().Fresh, "a second spare")
	runtime.KeepAlive(a)
}

// A size whose regions come back by GiveBack needs no collection after a
// receive: taking the last free region marks none due while the last
// region of that size to come back was given back, and marks one due
// again once a request of that size finds no region free.
func TestPoolGiveBackSkipsCollection(t *testing.T) {
	p := testPool(t, 1<<30)
	const n = 300 << 10 // past collectMin
	a, err := p.get(n)  // a new region: the pool has none of this size
	require.NoError(t, err)
	require.True(t, p.due.Swap(false), "a new region, none given back yet: due")
	b, err := p.get(n)
	require.NoError(t, err)
	require.True(t, p.due.Swap(false))
	require.True(t, p.giveBack(a)) // the caller releases the result before last
	c, err := p.get(n)             // takes a's region, the last free one
	require.NoError(t, err)
	assert.Equal(t, addr(a), addr(c))
	assert.False(t, p.due.Load(), "the region came back by GiveBack: no collection")
	require.True(t, p.giveBack(b))
	d, err := p.get(n)
	require.NoError(t, err)
	assert.False(t, p.due.Load(), "still given back: no collection")
	// The caller keeps c and d: the next request finds no region free.
	e, err := p.get(n)
	require.NoError(t, err)
	assert.True(t, p.due.Load(), "none came back in time: due again")
	runtime.KeepAlive(c)
	runtime.KeepAlive(d)
	runtime.KeepAlive(e)
}

// GiveBack returns a handed-out region to the pool at once, without a
// collection, and only the exact bytes a request got: a part of a region,
// memory from elsewhere, or a region already given back is refused. The
// region's finalizer is gone with it: a collection does not bring it back
// a second time.
func TestPoolGiveBack(t *testing.T) {
	for _, n := range []int{PoolMin, 40 << 10, 300 << 10, HugeMin + 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			p := testPool(t, 1<<30)
			a, err := p.get(n)
			require.NoError(t, err)
			assert.False(t, p.giveBack(a[:n-8]), "a part of the region")
			assert.False(t, p.giveBack(make([]byte, n)), "memory from elsewhere")
			assert.False(t, p.giveBack(nil))
			s := p.snapshot()
			require.True(t, p.giveBack(a))
			after := p.snapshot()
			assert.Equal(t, s.Returned+1, after.Returned)
			assert.Equal(t, s.GivenBack+1, after.GivenBack)
			assert.Equal(t, s.Out-int64(regionSize(n)), after.Out)
			assert.Equal(t, int64(regionSize(n)), after.Idle, "the region waits in the pool")
			assert.False(t, p.giveBack(a), "given back twice")
			b, err := p.get(n)
			require.NoError(t, err)
			assert.Equal(t, addr(a), addr(b), "the next request takes the region")
			a = nil
			runtime.KeepAlive(a)
			// b holds the region now: the collector must not bring it back.
			for range 3 {
				runtime.GC()
				time.Sleep(2 * time.Millisecond)
			}
			assert.Equal(t, after.Returned, p.snapshot().Returned, "a finalizer brought the region back again")
			assert.True(t, p.giveBack(b))
		})
	}
}
