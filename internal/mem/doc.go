// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mem allocates the Go heap memory that tensor storages live in.
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
