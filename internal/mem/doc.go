// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package mem allocates the Go heap memory that tensor storages live in.
//
// Large storages are what tdmpi moves between ranks, and how fast MPI moves
// them depends on the memory: Open MPI's shared-memory transport copies a
// large message with one process_vm_readv call, whose cost is dominated by
// page-table work when the buffers are backed by 4 KiB pages. On the
// machines of docs/bench.txt a 256 MiB message between buffers backed by
// 2 MiB transparent huge pages moves about 1.4 times as fast as between
// ordinary heap buffers. Alloc and AllocUninit therefore advise the kernel
// (madvise MADV_HUGEPAGE) to back every allocation of at least HugeMin bytes
// with huge pages; the memory stays on the Go heap, is freed by the garbage
// collector, and may be used as any other slice.
//
// The second cost of a fresh buffer is clearing it: the runtime zeroes a
// reused heap span before handing it out, which for a 256 MiB receive
// buffer takes about as long as the receive itself. AllocUninit skips that
// for buffers that the caller overwrites completely before anyone reads
// them, such as a receive buffer that a message of exactly its length
// fills.
//
// The huge-page advice is Linux only and the uninitialised allocation
// needs the gc toolchain; elsewhere both fall back to make.
package mem
