//go:build linux

package tensor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// NewOffHeapStorage returns a zeroed Storage of n bytes outside the Go heap:
// an anonymous private memory mapping, advised to use transparent huge pages
// (MADV_HUGEPAGE; ignored where the kernel does not offer them), which MPI
// moves faster than Go heap memory in 4 KiB pages. Since the Go runtime
// neither moves nor scans it, it may be handed to nonblocking MPI calls
// without pinning, and it does not count towards the garbage collector's
// heap goal.
//
// The caller owns the storage and must call Release (which unmaps it) once
// no tensor, slice or MPI request uses it any more; the garbage collector
// never frees it. Tensors over a released storage return errors (or panic,
// for accessors that cannot return one) instead of touching unmapped memory,
// but slices obtained earlier from Bytes or Data must not be used after
// Release. It returns an error if n is negative or the mapping fails.
func NewOffHeapStorage(n int) (*Storage, error) {
	if n < 0 {
		return nil, fmt.Errorf("tensor: NewOffHeapStorage: negative size %d", n)
	}
	if n == 0 {
		return NewExternalStorage([]byte{}, offHeap{}, nil), nil
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("tensor: NewOffHeapStorage: mmap of %d bytes: %w", n, err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice only: may be unsupported
	return NewExternalStorage(b, offHeap{}, func() error {
		if err := unix.Munmap(b); err != nil {
			return fmt.Errorf("tensor: Release: munmap of %d bytes: %w", n, err)
		}
		return nil
	}), nil
}
