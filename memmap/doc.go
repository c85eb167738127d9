// Package memmap provides memory-mapped tensors and the on-disk format of
// saved TensorDicts, compatible with Python tensordict's MemoryMappedTensor
// and its memmap directories.
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
// through. FromFile and ReadMeta refuse anything that is not a
// regular file (symbolic link, directory, named pipe, socket, device)
// without blocking on it.
//
// The Go runtime does not manage mapped memory: Close unmaps it (after
// which the tensor reports "storage was released" errors instead of
// crashing), Flush makes changes durable (msync), Filename and Is inspect a
// tensor. A mapping that is never closed lives until the process exits.
//
// # meta.json and file names
//
// Each node of a saved TensorDict is a directory with a meta.json. ReadMeta
// and ParseMeta read one whatever its JSON spacing, keeping member order and
// refusing files larger than MaxMetaSize; TensorDictMeta and NonTensorMeta
// interpret and write it, field for field as tensordict does with Python's
// standard json module (", " and ": " separators, ensure_ascii);
// NonTensorStackMeta does the same for a NonTensorStack node, which
// tensordict writes compact ("," and ":"). WriteMeta replaces a meta.json
// atomically.
//
// EncodeKey and DecodeKey map entry keys to file names exactly as
// tensordict 0.13 and later do (percent-encoding of characters unsafe in
// file names); an encoded key never escapes its directory. LegacyName gives
// the unencoded name older versions used, when it is safe to look for.
//
// # Concurrent writers
//
// LockDir takes an advisory lock (flock) on a directory: package
// tensordict's Memmap holds it exclusively on every directory it writes,
// and LoadMemmap shared on the one it loads, so that saves into one
// directory take turns and a load sees one of them whole.
//
// Package memmap knows nothing of TensorDict itself: package tensordict
// builds Memmap and LoadMemmap on it.
//
// # Files
//
//	create.go   FromTensor, Empty, Zeros, Full, FromFile: creating and
//	            mapping files (anonymous ones in /dev/shm); an overwritten
//	            file is replaced by rename
//	file.go     File, the mapping behind a tensor: Of, Is, Filename, Flush,
//	            Close
//	options.go  Option: ExistsOK, Private
//	open.go     opening only regular files, never through symbolic links
//	meta.go     Meta, ReadMeta, ParseMeta: the meta.json schema and its limits
//	            (MetaFile, MaxMetaSize), TensorDictMeta, Leaf, Entry
//	key.go      EncodeKey, DecodeKey, LegacyName, KeyPath: tensordict's file
//	            names for keys
//	pyjson.go   MarshalPython, Respace: JSON written byte for byte as Python's
//	            json.dumps writes it
package memmap
