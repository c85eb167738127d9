// Package memmap provides memory-mapped tensors, compatible with Python
// tensordict's MemoryMappedTensor and the tensor files of its memmap
// directories.
//
// # Memory-mapped tensors
//
// FromTensor, Empty, Zeros, Full and FromFile return ordinary
// *tensor.Tensor values whose Storage is a memory mapping owned by a *File.
// A tensor file holds the elements in row-major order, little-endian, with
// no header: exactly tensordict's "<key>.memmap" files. Dtype and shape live
// in the caller's hands or in meta.json.
//
// With an empty filename the mapping is anonymous: an unlinked file in
// /dev/shm (or os.TempDir when /dev/shm is short of room). Named files are
// created exclusively unless ExistsOK is given, and symbolic links are
// refused. A tensor with no elements creates no file.
//
// Every new file has all its blocks allocated before its constructor
// returns (written, or reserved with fallocate), so a full file system is
// an error wrapping syscall.ENOSPC that names the file, which is removed,
// and never a SIGBUS on a later store into the mapping.
//
// FromFile maps a file this process may write with MAP_SHARED, so writes
// from other processes that map it are seen, and writes through the tensor
// reach the file; a read-only file (or the Private option) is mapped
// copy-on-write. A file with several hard links is mapped shared only
// with the HardLinks option (ErrHardLink otherwise), so that a leaf of a
// foreign directory that is a link to another file cannot be written
// through. FromFile and ReadFile refuse anything that is not a
// regular file (symbolic link, directory, named pipe, socket, device)
// without blocking on it.
//
// The Go runtime does not manage mapped memory: Close unmaps it (after
// which the tensor reports "storage was released" errors instead of
// crashing), Flush makes changes durable (msync), Filename and Is inspect a
// tensor. A mapping that is never closed lives until the process exits,
// even once nothing in Go refers to its tensor: slices and gonum matrices
// over its bytes (Data, Dense, Bytes) point into it, and the collector
// cannot see them, so unmapping an unreachable tensor could pull memory
// from under them. A program that maps many files closes each when done
// (Linux limits a process to vm.max_map_count mappings, 65530 by default;
// past that, mapping returns an error).
//
// # Saved TensorDicts
//
// Package tensordict's Memmap and LoadMemmap save and load whole
// TensorDicts in tensordict's directory format (a meta.json per node, a
// "<key>.memmap" file per tensor); the format itself is internal.
// Package memmap knows nothing of TensorDict.
//
// # Files
//
//	create.go   FromTensor, Empty, Zeros, Full, FromFile: creating and
//	            mapping files (anonymous ones in /dev/shm); an overwritten
//	            file is replaced by rename
//	read.go     ReadFile: a tensor file read into memory
//	file.go     File, the mapping behind a tensor: Of, Is, Filename, Flush,
//	            Close; Guard for truncated files
//	shared.go   one shared mapping per file while it is in use
//	options.go  Option: ExistsOK, Private, HardLinks
//	open.go     the refusal of files with several hard links
//	errors.go   ErrFault, ErrHardLink
package memmap
