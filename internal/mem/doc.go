// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mem allocates the Go heap memory that tensor storages live in,
// checks that the machine has memory for a large allocation, and catches
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
// buffer backed by 2 MiB transparent huge pages. Huge asks for them
// (madvise MADV_HUGEPAGE). It is worth it for a buffer that lives long and
// is sent often, such as a consolidated storage, and not for short-lived
// ones: a new huge page must be found and cleared by the kernel, and in a
// virtual machine whose host takes back free guest memory (virtio-balloon
// free page reporting, as on these machines) the host must fault it in
// again, which cost up to 5 ms per 2 MiB page here, six times the transfer
// itself. Setting TDMPI_HUGEPAGES=0 in the environment turns the advice
// off.
//
// The huge-page advice is Linux only and the uninitialised allocation
// needs the gc toolchain; elsewhere Huge does nothing and AllocUninit
// clears, as make does.
//
// # Files
//
//	mem.go           Alloc, AllocUninit, Huge, NoHuge, HugeMin
//	env.go           TDMPI_HUGEPAGES
//	advise_*.go      madvise for huge pages (Linux; a no-op elsewhere)
//	nozero_gc.go     allocation without clearing, through the gc
//	                 toolchain's allocator
//	nozero_other.go  the same, cleared, with other toolchains
package mem
