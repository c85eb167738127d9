// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mem allocates the Go heap memory that tensor storages live in,
// keeps a pool of it for receives, checks that the machine has memory for a large allocation, and catches
// faults on mapped memory.
//
// # Available memory
//
// The Go runtime cannot fail an allocation: a heap allocation the kernel
// refuses ends the process with "fatal error: runtime: out of memory",
// and one it grants beyond the machine's memory draws the out-of-memory
// killer later. A peer's header may announce any size, so a receive checks
// first: CheckAvailable (and AllocChecked, which allocates after it)
// refuses, with an error wrapping ErrNoMemory, a request above Available,
// which is MemAvailable of /proc/meminfo lowered to the room under the
// memory limit of the process's control group (cgroup v2 or v1) and its
// ancestors. Physical is the machine's memory under that limit; package
// wire lowers its default size limit to it. Requests below CheckMin are
// not checked.
//
// # Faults on mapped memory
//
// A page of a file mapping past the end of a file that another process
// truncated raises SIGBUS when touched, which ends a Go program. CatchFault
// runs a function with debug.SetPanicOnFault on and returns such a fault
// as an error wrapping ErrFault. It covers Go code on the calling
// goroutine only; a fault inside C (an MPI call reading the memory) still
// ends the process.
//
// # Clearing
//
// The runtime clears a reused heap span before handing it out; for a
// 64 MiB buffer that takes about as long as receiving it over shared
// memory. AllocUninit skips the clearing, for buffers that the caller
// overwrites completely before anyone reads them: a receive buffer that a
// message of exactly its length fills, or a consolidated storage whose
// leaves and pads tile it.
//
// # Huge pages
//
// Open MPI's shared-memory transport copies a large message with one
// process_vm_readv call on the receiving side, whose cost is dominated by
// walking the sender's pages when they are 4 KiB pages. On the machines of
// docs/bench.txt a 256 MiB message moves about 1.3 times as fast from a
// buffer backed by 2 MiB transparent huge pages. The receive pool asks
// for them (madvise MADV_HUGEPAGE) for its regions, whose buffers live
// long and are sent or received often: received storages, and
// consolidated ones (package tensordict's Consolidate takes its storage
// from Recv). Advice alone does not do it for a new heap object: the
// memory it reuses keeps the pages it was faulted in with, so a new
// region from HugeMin up has those of its huge-page interior dropped
// first, and so have the buffers of Huge and NoHuge, which give
// benchmark baselines a known page size. New memory of either kind is
// slow: on this project's VM (load 10-20, Dec 2026) faulting in 256 MiB
// of fresh anonymous memory ran at 0.8-3.2 GB/s with huge pages and
// 0.4-0.6 GB/s with 4 KiB pages (1.6-7.7 times as long), below the 1.5-7
// GB/s of the transfer itself, where the host takes back free guest
// memory (virtio-balloon free page reporting) and must fault it in again. Hence the receive pool. Setting
// TDMPI_HUGEPAGES=0 in the environment turns the advice off.
//
// # Receive pool
//
// A receive into a new TensorDict (FromRemoteInit, its broadcast mode,
// Broadcast) needs memory for the whole storage, and a loop that drops the
// previous result needs it again each round; so does a loop that
// consolidates a TensorDict to send it (Consolidate takes its storage from
// Recv and calls Received as a receive does). Recv serves requests of at
// least PoolMin bytes (4 KiB, where Open MPI's shared-memory transport
// starts to copy a message straight from the sender's memory, which is
// slow into memory the receiver has not used lately) from a pool of
// regions that stay faulted in:
//
//   - A region is Go heap memory (pointer-free, not cleared). From
//     HugeMin (4 MiB) up it is a whole number of 2 MiB huge pages, aligned
//     (the heap object is a huge page larger, and the region is its
//     aligned part): a new one has the 4 KiB pages it may reuse from the
//     heap dropped (MADV_DONTNEED) and is advised to use huge pages, so
//     that the receive faults it in as huge pages, once. Below, it is the
//     request rounded up to a quarter of a power of two (at most 25%
//     more); from 256 KiB up, the 2 MiB windows it lies in are advised to
//     use huge pages, which a new window then faults in whole, heap
//     neighbours included. On this project's VM 4 KiB pages of new memory
//     cost about 10 us each (3 ms for 1 MiB, against 0.27 ms in huge
//     pages), and a fresh 256 KiB FromRemoteInit took 2.8x the time of
//     one into reused memory before such requests were pooled.
//   - It comes back by itself: a finalizer on the region's first word
//     (runtime.SetFinalizer, which, unlike runtime.AddCleanup, may revive
//     its object) puts it back in the pool when the collector finds no
//     reference to any byte of it. Every slice into the region (the
//     Storage's, a tensor's, one a user took from Bytes or Data, a
//     pointer to one element, a nonblocking MPI request's runtime.Pinner)
//     keeps it reachable, so a region is never handed out while anything
//     can still reach it: there is no use-after-free to guard against,
//     and nothing to free. Storage.Release (and TensorDict.Release) drops
//     the storage's own reference at once; the region comes back at the
//     next collection once nothing else holds it.
//   - Or at once, at Storage.Release (GiveBack), when nothing outside
//     tdmpi's transfers ever had its bytes: no Bytes, Data or Dense handed
//     them out, no transfer that reads them is under way (see package
//     rawbytes). A loop that releases each result then needs no
//     collection at all: on this project's VM, fresh InitRemotes of 16 KiB
//     to 1 MiB went from 25-690 us to 20-300 us one way (tdmpi bench, two
//     alternating runs), with one new region per size instead of 20-300.
//   - When a request finds no region of its size and at least nudgeMin
//     (64 MiB, and at least the request) is out, it runs the collector
//     (runtime.GC) and waits up to 5 ms for a region to come back. A nudge
//     that brings nothing back (the results are all still in use) is not
//     repeated until twice as many bytes are out. A collection is not
//     free: runtime.GC took about 4 ms here under load, which is what a
//     fresh 256 MiB receive still costs beyond a reused buffer (the
//     benchmarks report it as nudge-ms/op).
//   - A receive that took the last free region of its size, from 256 KiB
//     up, starts a collection in the background as it hands its result
//     over (Received, which FromRemoteInit and Broadcast call): the
//     result the caller drops then, the one before, comes back while the
//     caller works, and its next receive finds it instead of nudging or
//     taking new memory. In tdmpi bench's loops of fresh receives this
//     removed the nudges (3.5-5 ms each) from 4 MiB up and took the
//     receive from 0.46-1.10x to 0.32-0.76x raw MPI's time at 4-32 MiB,
//     and from 0.70-0.98x to 0.51-0.65x at 64-256 MiB; at 512 KiB, from
//     5.1x to 1.9-2.0x (60% of those receives had taken new memory).
//     Not while the last region of that size to come back was given back
//     (GiveBack): a loop that releases its results has them back without
//     one (256 KiB-4 MiB fresh InitRemotes 1.5-3x faster, three
//     alternating runs); once a request of the size finds none free,
//     collections are due again.
//   - Releasing a storage over such memory (Dropped, which
//     tensor.Storage.Release calls) starts that collection too, from 4
//     MiB up (dropMin), when no region of its size waits, or runs the one
//     under way once more: the collection Received started could mark the
//     result live just before the caller released it. In tdmpi bench's
//     loops (each result released before the next receive) this removed
//     the 1-7 nudges in 22 receives at 64 and 256 MiB: 64 MiB went from
//     9.6-10.3 ms to 6.5-7.7 ms one way (three alternating runs of each
//     binary). Between 256 KiB and 4 MiB the next receive comes before a
//     collection could end: one per release kept a collection running all
//     the time (1-4 MiB took 1.38-1.83x raw against 1.01-1.39x without).
//     Released regions under 256 KiB start one every 4 MiB of them
//     (smallCollect): fresh InitRemotes of 16-32 KiB went from 43-112 us
//     to 11-13 us one way, 64 KiB from 193-247 us to 16-19 us, with 7-14%
//     of the regions new instead of 40-90% (on a day when new memory was
//     slow).
//   - After two requests of one size got their region by waiting for a
//     collection (spareAfter), the next takes a new one: one more region
//     of that size goes round (one spare per size, until the pool drops
//     every idle region of the size). The receiver of a ping-pong
//     (receive, send back, release, receive) otherwise waits at every
//     receive for the collection its release has just started: in tdmpi
//     bench at 64-256 MiB the two ranks waited 48-60 times (3.5-6 ms
//     each) in a run, 6-11 times with the spare; broadcast-mode
//     InitRemote of 64 MiB went from 12.0-12.6 to 10.1 ms one way.
//   - At most the limit waits in the pool: an eighth of the machine's
//     memory (Physical) by default, TDMPI_RECV_POOL ("2GiB") in the
//     environment, SetPoolLimit at run time; 0 turns reuse off. Of it,
//     regions under HugeMin take at most 64 MiB, so that a program that
//     receives many sizes does not keep one of each. A region that comes
//     back when the pool is full takes the place of those that waited
//     longest, so that the sizes received now keep theirs (before this
//     rule, a tdmpi bench run over all sizes measured 64 KiB receives at
//     13x raw after the smaller sizes had filled the pool; 2.1-2.5x
//     alone). A
//     region dropped so, or unused for 10 s, goes to the collector, and
//     the runtime's scavenger returns it to the OS.
//   - The resident set under a loop of fresh receives stays at the live
//     results plus about two regions (TestFromRemoteInitSoak: 200 receives
//     of 64 MiB, each result alive for one more round, peak resident set
//     under 6 x 64 MiB over the start).
//
// Stats returns the pool's counters (the benchmarks report the share of
// receives it served).
//
// The huge-page advice is Linux only and the uninitialised allocation
// needs the gc toolchain; elsewhere Huge does nothing and AllocUninit
// clears, as make does.
//
// # Files
//
//	mem.go           Alloc, AllocUninit, Huge, NoHuge, HugeMin
//	pool.go          the receive pool: Recv, Received, Dropped, SetPoolLimit, Stats,
//	                 TDMPI_RECV_POOL
//	env.go           TDMPI_HUGEPAGES
//	advise_*.go      madvise for huge pages (Linux; a no-op elsewhere)
//	nozero_gc.go     allocation without clearing, through the gc
//	                 toolchain's allocator
//	nozero_other.go  the same, cleared, with other toolchains
package mem
