// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tdmpi/tdmpi/internal/bytesize"
)

// PoolMin is the smallest request Recv serves from the pool. From 4 KiB up
// (the eager limit of Open MPI's shared-memory transport, with its
// headers) a message travels by single copy: the receiver's kernel copies
// it from the sender's memory (CMA), which ran 2.5-3 times as slow into a
// new Go allocation as into a buffer used before (18 KiB: 17-21 us
// against 6.7-7.5 us one way; 66 KiB: 44-50 us against 13-17 us, 20-27 us
// into pool regions). Smaller messages are copied out of a shared queue,
// and smaller requests are plain AllocUninit.
const PoolMin = 4 << 10

// Pool tuning. Where no measurement is cited, the value is a judgment of
// scale, not a measured optimum.
const (
	// poolIdle is how long a region may wait in the pool unused before
	// the pool drops it (gives it back to the runtime, whose scavenger
	// returns it to the OS): 10 s, far longer than the gap between the
	// receives of a loop, short enough that the regions of a phase of the
	// program that ended go soon after it.
	poolIdle = 10 * time.Second
	// nudgeMin is how many bytes of handed-out regions, not yet come
	// back, make a request that the pool cannot serve run the collector
	// first: 64 MiB, a scale where the memory a collection may bring
	// back outweighs its cost (the collection, and up to nudgeWait).
	nudgeMin int64 = 64 << 20
	// nudgeWait is how long such a request waits, after the collection,
	// for the finalizers that put unreachable regions back: 5 ms, enough
	// for them to run after a collection on a machine that is not
	// overloaded (they run on a goroutine of their own).
	nudgeWait = 5 * time.Millisecond
	// spareAfter is how many requests for regions of one size may get
	// theirs by waiting for a collection (nudge) before the next takes a
	// new region instead, so that one more region of the size goes round.
	// A loop that releases its result just before its next receive (the
	// receiver of a ping-pong: receive, send back, release) otherwise
	// waits for the collection its release started at every receive: in
	// tdmpi bench at 64 MiB, rank 1 waited (3.5-6 ms) in most of them.
	// Two: a loop that waited twice in a row will wait again.
	spareAfter = 2
	// spareTaken marks, in pool.waits, a size that took its spare region:
	// one at most, until the pool drops every idle region of the size.
	// Waits that a spare did not end come from a loop that needs a
	// collection whatever the number of regions (each result used for
	// one more round, say), and more regions would only grow the
	// resident set.
	spareTaken = math.MinInt
	// collectMin is the smallest region whose receive starts a
	// collection when it took the last free one of its size (see
	// Received). In tdmpi bench's loops, fresh InitRemotes of 4-32 MiB
	// ran at 0.32-0.76x raw with it against 0.46-1.10x without (a nudge
	// every few receives), 512 KiB at 1.9-2.0x against 5.1-5.2x (60% of
	// the receives into new memory), 1-2 MiB about the same; below 256
	// KiB a collection per receive cut the new regions by a factor of 3-5
	// and saved no time (smaller regions count towards smallCollect
	// instead).
	collectMin int64 = 256 << 10
	// dropMin is the smallest region whose release (Dropped) starts a
	// collection to bring it back (see there): HugeMin, the regions that
	// are huge pages, whose next receive comes after a collection could
	// end.
	dropMin int64 = HugeMin
	// smallIdleMax bounds the bytes of regions under HugeMin that wait
	// in the pool, within its limit: a program receiving many sizes
	// would otherwise keep a region of each, resident, for poolIdle
	// (TestSoak at np 4 grew VmRSS past its bound with every size kept).
	// 64 MiB holds 18 regions of the largest such size (3.5 MiB).
	smallIdleMax int64 = 64 << 20
	// smallCollect is how many bytes of regions under collectMin must be
	// released (Dropped) for a collection to start that brings them back.
	// Such regions come back only with a collection, and one per receive
	// costs more than it saves; without this, a loop of receives that
	// releases its results waits for the runtime's own collections, which
	// come when the heap has grown by its live size (4 MB at least, more
	// with regions of other sizes waiting in the pool) of new memory. On
	// this project's VM (Dec 2026, when new memory was slow) tdmpi
	// bench's fresh InitRemote of 16 KiB took 43 us one way with 40-60%
	// of the receives into new regions, 11-12 us with one collection per
	// 4 MiB released (7-14% new); 64 KiB 213-225 us against 17-20 us.
	// Results dropped without a release are left to the runtime's
	// collections: counting new regions instead, so as to collect for
	// them too, made the go test benchmark of 64 KiB receives (a small
	// heap, whose own collections bring the regions back) 30% slower.
	smallCollect int64 = 4 << 20
	// aroundMin is the smallest new region under HugeMin whose huge-page
	// windows are advised to use huge pages (adviseAround). On this
	// project's VM (Dec 2026) writing 1 MiB of new heap memory took 3 ms on
	// 4 KiB pages and 0.27 ms in huge pages; tdmpi bench's fresh
	// InitRemote of 256 KiB and 1 MiB, which takes new regions while the
	// pool fills, ran at 38-63 us and 135-344 us one way with it against
	// 49-189 us and 145-483 us without (three alternating runs). Below,
	// a region is a small part of the window it would advise.
	aroundMin int64 = 256 << 10
)

// pool is the process's pool of receive regions; see the package
// documentation ("Receive pool").
type pool struct {
	mu        sync.Mutex
	free      map[int][]idleRegion // by region size
	idle      int64                // bytes in free
	idleHeap  int64                // bytes of heap objects in free (objectSize)
	idleSmall int64                // bytes in free in regions under HugeMin
	limit     int64                // most bytes free may hold
	out       int64                // bytes handed out and not yet back
	nudgeAt   int64                // out must reach this for the next nudge
	// A collection after a receive (see Received): due is set when a
	// request took the last region of its size, done is closed when the
	// running collection ends (nil if none runs), and collectAt is what
	// out must reach for the next one.
	due          atomic.Bool
	done         chan struct{}
	collectAt    int64
	smallDropped int64 // bytes of regions under collectMin released (Dropped) since the last collection started
	// again: a region was dropped (Dropped) while the running collection
	// had already started; it runs once more when it ends (once: a
	// collection runs at most twice in a row).
	again bool
	timer *time.Timer   // drops idle regions; nil when free is empty
	back  chan struct{} // a region came back (capacity 1)
	// waits counts, by region size, the requests that got their region
	// by waiting for a collection (spareTaken once the size took its
	// spare).
	waits map[int]int
	// given maps the address of each region handed out to where its heap
	// object starts (off bytes before it) and its size, for GiveBack.
	// Addresses, not pointers: the map keeps no region alive.
	given map[uintptr]givenRegion
	// givesBack holds the region sizes whose last region to come back was
	// given back by a release (GiveBack), until a request of that size
	// finds none free: a program that releases its results needs no
	// collection for them (see markDue).
	givesBack map[int]bool
	stats     PoolStats
	hugeAdvis bool // advise new regions to use huge pages (hugeOn)
}

// givenRegion is where a handed-out region's heap object starts, off bytes
// before the region, the region's size, and the n bytes of it handed out.
type givenRegion struct{ off, size, n int }

// idleRegion is a region waiting in the pool, and since when.
type idleRegion struct {
	base  *uint64
	since time.Time
}

// PoolStats counts what the receive pool did since the process started.
type PoolStats struct {
	Fresh     int64 // requests served with new memory
	Reused    int64 // requests served with a region that came back
	Nudges    int64 // collections a request ran (and waited for) to get regions back
	NudgeNs   int64 // nanoseconds spent in them, waits for finalizers included
	Returned  int64 // regions that came back (found unreachable, or given back)
	GivenBack int64 // of those, regions given back at once by a release (GiveBack)
	Dropped   int64 // regions given back to the runtime (over the limit, or idle)
	Idle      int64 // bytes waiting in the pool now
	IdleHeap  int64 // bytes of Go heap the waiting regions' objects take: Idle, plus the unwritten huge page of each from HugeMin up (see alloc)
	Out       int64 // bytes handed out and not yet come back
	Limit     int64 // the limit on Idle
}

var recvPool = newPool()

func newPool() *pool {
	return &pool{free: map[int][]idleRegion{}, waits: map[int]int{}, given: map[uintptr]givenRegion{}, givesBack: map[int]bool{}, limit: defaultPoolLimit(), back: make(chan struct{}, 1), hugeAdvis: hugeOn}
}

// defaultPoolLimit is TDMPI_RECV_POOL when set and valid, else an eighth
// of the machine's memory (Physical), else 1 GiB.
func defaultPoolLimit() int64 {
	if s := os.Getenv("TDMPI_RECV_POOL"); s != "" {
		if n, err := bytesize.Parse(s); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "tdmpi: ignoring TDMPI_RECV_POOL=%q: not a size\n", s)
	}
	if p := Physical(); p > 0 {
		return p / 8
	}
	return 1 << 30
}

// regionSize is the size of the region that serves a request of n bytes,
// so that requests of nearly the same size share regions: from HugeMin up,
// n rounded up to whole huge pages; below, n rounded up to a quarter of
// the largest power of two not above it (40, 48, 56, 64, 80 KiB ...: at
// most a quarter more than n).
func regionSize(n int) int {
	if n >= HugeMin {
		return (n + hugePage - 1) &^ (hugePage - 1)
	}
	step := 1 << (bits.Len(uint(n)) - 3) // n >= 8
	return (n + step - 1) &^ (step - 1)
}

// Recv returns n bytes for a receive buffer (or another new storage its
// caller fills whole, as Consolidate's), 8-byte aligned, whose
// contents are undefined (as AllocUninit's): the caller must overwrite all
// n bytes before anything reads them. A request of at least PoolMin bytes
// is served by the receive pool (see the package documentation): a region
// of Go heap memory (advised to use huge pages from HugeMin up) that a receive whose
// result was dropped handed back, already faulted in; or a new one. The
// region goes back to the pool by itself once nothing references it (no
// slice into it is reachable); there is nothing to free.
//
// It returns an error wrapping ErrNoMemory, as AllocChecked, if n bytes of
// new memory are needed and not available, and an error if n is negative.
func Recv(n int) ([]byte, error) {
	if n < PoolMin {
		return AllocChecked(n)
	}
	return recvPool.get(n)
}

func (p *pool) get(n int) ([]byte, error) {
	size := regionSize(n)
	if b := p.take(size, n); b != nil {
		return b, nil
	}
	if p.shouldNudge(size) {
		if b := p.nudge(size, n); b != nil {
			return b, nil
		}
	}
	p.mu.Lock()
	if p.waits[size] >= spareAfter {
		p.waits[size] = spareTaken
	}
	p.mu.Unlock()
	if err := CheckAvailable(int64(size)); err != nil {
		return nil, err
	}
	base := p.alloc(size)
	p.mu.Lock()
	p.stats.Fresh++
	p.out += int64(size)
	p.markDue(size)
	b := p.handOut(base, size, n)
	p.mu.Unlock()
	return b, nil
}

// alloc returns the base (the first word of the Go heap object) of a new
// region of size bytes, advised to use huge pages as the package
// documentation describes. From HugeMin up the object is one huge page
// larger than the region, which is its 2 MiB-aligned part (see
// p.region), so that the region is huge pages from end to end: an
// object as large, on the heap's 8 KiB alignment, would have up to 2 MiB
// at each end on 4 KiB pages, which cost about 10 us each to fault in on
// this project's VM (2.5 ms per MiB, against 0.08 ms in huge pages). The
// part of the object outside the region is never written, and so takes
// no memory.
func (p *pool) alloc(size int) *uint64 {
	b := allocNoZero(p.objectSize(size))
	base := (*uint64)(unsafe.Pointer(unsafe.SliceData(b)))
	switch {
	case p.aligned(size):
		freshHuge(p.region(base, size))
	case p.hugeAdvis && int64(size) >= aroundMin:
		adviseAround(b)
	}
	return base
}

// aligned reports whether a region of size bytes is the huge-page-aligned
// part of a larger heap object (see alloc).
func (p *pool) aligned(size int) bool { return p.hugeAdvis && size >= HugeMin }

// objectSize returns the size of the heap object that holds a region of
// size bytes.
func (p *pool) objectSize(size int) int {
	if p.aligned(size) {
		return size + hugePage
	}
	return size
}

// region returns the region of size bytes in the object at base: the
// object's first size bytes, or, aligned, its run of whole huge pages.
func (p *pool) region(base *uint64, size int) []byte {
	off := 0
	if p.aligned(size) {
		off, _ = hugeRange(uintptr(unsafe.Pointer(base)), p.objectSize(size))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(base)), off+size)[off:]
}

// take returns a free region of size bytes as a slice of n, or nil, and
// then forgets that regions of that size come back by release (givesBack).
func (p *pool) take(size, n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.free[size]
	if len(rs) == 0 {
		delete(p.givesBack, size) // none came back in time: collect after the next receive
		return nil
	}
	r := rs[len(rs)-1]
	rs[len(rs)-1] = idleRegion{}
	p.free[size] = rs[:len(rs)-1]
	p.unidle(size)
	p.out += int64(size)
	p.stats.Reused++
	p.markDue(size)
	return p.handOut(r.base, size, n)
}

// handOut arms the finalizer that brings the region at base back, records
// it for GiveBack and returns its first n bytes. p.mu must be held.
func (p *pool) handOut(base *uint64, size, n int) []byte {
	runtime.SetFinalizer(base, func(b *uint64) { p.put(b, size) })
	r := p.region(base, size)
	p.given[regionAddr(r)] = givenRegion{off: int(regionAddr(r) - uintptr(unsafe.Pointer(base))), size: size, n: n}
	return r[:n:n]
}

// regionAddr returns the address of region r's first byte.
func regionAddr(r []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(r))) }

// GiveBack returns to the pool at once the region whose memory b is, all
// of a receive's request (Recv), and reports whether it did: false if b is
// not exactly the bytes a request got (a request under PoolMin, or a part
// of one that other storages share). The
// caller guarantees that nothing will read or write the region again
// through any slice: tensor.Storage.Release calls it for a storage whose
// bytes never left tdmpi's own code. Other regions come back when the
// collector finds them unreachable.
func GiveBack(b []byte) bool { return recvPool.giveBack(b) }

func (p *pool) giveBack(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	addr := regionAddr(b)
	p.mu.Lock()
	g, ok := p.given[addr]
	ok = ok && g.n == len(b)
	if ok {
		delete(p.given, addr)
	}
	p.mu.Unlock()
	if !ok {
		return false
	}
	base := (*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -g.off))
	runtime.SetFinalizer(base, nil)
	p.put(base, g.size)
	p.mu.Lock()
	p.stats.GivenBack++
	p.givesBack[g.size] = true
	p.mu.Unlock()
	return true
}

// put takes back a region the collector found unreachable (the
// finalizer of handOut; reviving it is what finalizers, unlike cleanups,
// allow), or drops it if the pool is full.
func (p *pool) put(base *uint64, size int) {
	p.mu.Lock()
	delete(p.given, regionAddr(p.region(base, size)))
	p.out -= int64(size)
	p.stats.Returned++
	p.nudgeAt, p.collectAt = 0, 0
	if !p.makeRoom(size) {
		p.stats.Dropped++
		p.mu.Unlock()
		return
	}
	p.free[size] = append(p.free[size], idleRegion{base: base, since: time.Now()})
	p.idle += int64(size)
	p.idleHeap += int64(p.objectSize(size))
	if size < HugeMin {
		p.idleSmall += int64(size)
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(poolIdle, p.dropIdle)
	}
	p.mu.Unlock()
	select {
	case p.back <- struct{}{}:
	default:
	}
}

// makeRoom drops the regions that have waited longest until one of size
// bytes fits in the pool (under its limit and, for a region under
// HugeMin, under smallIdleMax with the other such regions), and reports
// whether it does: the sizes a program receives now keep their regions,
// those it received a while ago give theirs up. p.mu must be held.
func (p *pool) makeRoom(size int) bool {
	for {
		overAll := p.idle+int64(size) > p.limit
		overSmall := size < HugeMin && p.idleSmall+int64(size) > smallIdleMax
		if !overAll && !overSmall {
			return true
		}
		if !p.dropOldest(!overAll) {
			return false
		}
	}
}

// dropOldest drops the region that has waited longest, of those under
// HugeMin if small, and reports whether there was one. p.mu must be held.
func (p *pool) dropOldest(small bool) bool {
	oldest := -1
	for size, rs := range p.free {
		if len(rs) == 0 || small && size >= HugeMin {
			continue
		}
		if oldest < 0 || rs[0].since.Before(p.free[oldest][0].since) {
			oldest = size
		}
	}
	if oldest < 0 {
		return false
	}
	rs := p.free[oldest]
	n := copy(rs, rs[1:]) // waiting regions are in the order they came back
	rs[n] = idleRegion{}
	if n == 0 {
		delete(p.free, oldest)
		delete(p.waits, oldest)
		delete(p.givesBack, oldest)
	} else {
		p.free[oldest] = rs[:n]
	}
	p.unidle(oldest)
	p.stats.Dropped++
	return true
}

// unidle counts a region of size bytes out of the idle ones.
func (p *pool) unidle(size int) {
	p.idle -= int64(size)
	p.idleHeap -= int64(p.objectSize(size))
	if size < HugeMin {
		p.idleSmall -= int64(size)
	}
}

// shouldNudge reports whether a request for a region of size bytes that
// the pool cannot serve should run the collector first: when the regions
// handed out and not yet back are at least nudgeMin bytes and size, and
// the last nudge that brought nothing back was made with fewer out.
func (p *pool) shouldNudge(size int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out >= max(nudgeMin, int64(size)) && p.out >= p.nudgeAt && p.waits[size] < spareAfter
}

// nudge runs the collector, so that the finalizers of unreachable regions
// put them back, and waits up to nudgeWait for one of size bytes. If none
// comes, later requests nudge again only once twice as many bytes are
// out (counting the new region this request then takes).
func (p *pool) nudge(size, n int) []byte {
	start := time.Now()
	defer func() {
		p.mu.Lock()
		p.stats.Nudges++
		p.stats.NudgeNs += time.Since(start).Nanoseconds()
		p.mu.Unlock()
	}()
	select { // forget an old signal
	case <-p.back:
	default:
	}
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done != nil {
		// A collection is running (Received): its finalizers may bring a
		// region back. Another runtime.GC would wait for it, then run a
		// collection of its own.
		<-done
		runtime.Gosched() // the finalizers run after it
		if b := p.take(size, n); b != nil {
			p.waited(size)
			return b
		}
	}
	runtime.GC()
	deadline := time.NewTimer(nudgeWait)
	defer deadline.Stop()
	for {
		if b := p.take(size, n); b != nil {
			p.waited(size)
			return b
		}
		select {
		case <-p.back:
		case <-deadline.C:
			p.mu.Lock()
			p.nudgeAt = 2 * (p.out + int64(size))
			p.mu.Unlock()
			return nil
		}
	}
}

// waited counts a request for a region of size bytes that got one by
// waiting for a collection (see spareAfter).
func (p *pool) waited(size int) {
	p.mu.Lock()
	if p.waits[size] != spareTaken {
		p.waits[size]++
	}
	p.mu.Unlock()
}

// markDue records, as a request of size bytes takes a region, whether the
// next Received should start a collection: the request took the last free
// region of its size (or a new one), from collectMin up, so that the next
// request of that size would find none, and the regions of that size do
// not come back by their releases (givesBack). p.mu must be held.
func (p *pool) markDue(size int) {
	if int64(size) >= collectMin && len(p.free[size]) == 0 && !p.givesBack[size] {
		p.due.Store(true)
	}
}

// Received tells the pool that a receive into memory from Recv has ended
// and its result goes to the caller. If that receive took the last free
// region of its size, from collectMin (256 KiB) up, and the last region of
// that size to come back was not given back by a release (GiveBack: a
// loop that releases its results has its regions back without one),
// Received starts a collection in the background: a loop that drops each result when it
// has the next one then has the region of the result before back by its
// next receive, collected while it worked, instead of waiting for a
// collection in that receive (nudge: 3.5-5 ms of a 20-30 ms 256 MiB
// receive on this project's VM) or taking new memory. The caller's
// result itself is live, and what it dropped just before is not: the
// collection starts after the caller's assignment of the new result,
// since starting one takes longer than that. A collection that brings
// nothing back (the results are all still in use) is not repeated until
// twice as many bytes are out.
func Received() { recvPool.received() }

func (p *pool) received() {
	if !p.due.Load() {
		return
	}
	p.mu.Lock()
	if p.done != nil || p.out < p.collectAt {
		p.mu.Unlock()
		return
	}
	p.due.Store(false)
	p.collect() // unlocks p.mu
}

// Dropped tells the pool that a storage over n bytes of memory from Recv
// was released (tensor.Storage.Release) and no longer references it: its
// region comes back at the next collection if nothing else holds it. If no
// region of its size waits in the pool, from dropMin (4 MiB) up, Dropped starts
// that collection in the background (or has the running one, which may
// have seen the storage's reference, run once more), so that the next
// receive of that size finds the region instead of nudging: a loop that
// releases each result before its next receive, where Received's
// collection, started while the result was still the caller's, comes too
// early for it. Regions under collectMin start one every smallCollect
// bytes released; those between are left to Received's collections (one
// per release took 1 MiB receives from 1.2-1.4x to 1.2-1.8x raw, a
// collection running all the time).
func Dropped(n int) { recvPool.dropped(n) }

func (p *pool) dropped(n int) {
	if n < PoolMin {
		return
	}
	size := regionSize(n)
	p.mu.Lock()
	switch {
	case int64(size) < collectMin:
		p.smallDropped += int64(size)
		if p.smallDropped < smallCollect || p.done != nil {
			p.mu.Unlock()
			return
		}
		p.collect()
	case int64(size) < dropMin || len(p.free[size]) > 0:
		// Under dropMin the next receive comes before a collection could
		// end: the collections Received starts serve them.
		p.mu.Unlock()
	case p.done != nil:
		p.again = true
		p.mu.Unlock()
	default:
		p.due.Store(false)
		p.collect()
	}
}

// collect starts a collection in the background, with p.mu held (it
// unlocks it) and none running. When it ends, its finalizers have run or
// are about to; if they brought nothing back (the results are all still
// in use), Received starts no other until twice as many bytes are out.
func (p *pool) collect() {
	done := make(chan struct{})
	p.done = done
	p.smallDropped = 0
	returned := p.stats.Returned
	p.mu.Unlock()
	go func() {
		for rerun := false; ; rerun = true {
			runtime.GC()
			runtime.Gosched() // the finalizers run after it
			p.mu.Lock()
			if !p.again || rerun {
				break
			}
			p.mu.Unlock()
		}
		p.again = false
		if p.stats.Returned == returned {
			p.collectAt = 2 * p.out
		}
		p.done = nil
		p.mu.Unlock()
		close(done)
	}()
}

// Settle waits until no collection the pool started (see Received and
// Dropped) is running, and returns at once if none is. A benchmark that
// times several methods in turn calls it between them, so that one
// method's time does not include a collection another method's receives
// or releases started.
func Settle() { recvPool.settle() }

func (p *pool) settle() {
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		if done == nil {
			return
		}
		<-done
	}
}

// dropIdle drops the regions that waited poolIdle or longer, and runs
// again while any are left: the timer that put starts.
func (p *pool) dropIdle() { p.dropIdleAt(time.Now()) }

// dropIdleAt is dropIdle at the time now.
func (p *pool) dropIdleAt(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for size, rs := range p.free {
		keep := rs[:0]
		for _, r := range rs {
			if now.Sub(r.since) >= poolIdle {
				p.unidle(size)
				p.stats.Dropped++
				continue
			}
			keep = append(keep, r)
		}
		clear(rs[len(keep):])
		if len(keep) == 0 {
			delete(p.free, size)
			delete(p.waits, size)
		} else {
			p.free[size] = keep
		}
	}
	if len(p.free) == 0 {
		p.timer = nil
		return
	}
	p.timer.Reset(poolIdle)
}

// setLimit sets the most bytes the pool keeps idle, dropping the regions
// that waited longest until it holds no more, and returns the previous
// limit.
func (p *pool) setLimit(n int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.limit
	p.limit = max(n, 0)
	for p.idle > p.limit && p.dropOldest(false) {
	}
	return old
}

func (p *pool) snapshot() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Idle, s.IdleHeap, s.Out, s.Limit = p.idle, p.idleHeap, p.out, p.limit
	return s
}

// SetPoolLimit sets the most bytes the receive pool keeps for reuse
// (regions waiting for a receive; regions in use are not counted), drops
// regions until it keeps no more, and returns the previous limit. 0 turns
// reuse off. The default is TDMPI_RECV_POOL (a size such as "2GiB") or
// an eighth of the machine's memory.
func SetPoolLimit(n int64) int64 { return recvPool.setLimit(n) }

// Stats returns the receive pool's counters.
func Stats() PoolStats { return recvPool.snapshot() }
