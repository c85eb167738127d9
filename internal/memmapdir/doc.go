// Package memmapdir is the on-disk format of a saved TensorDict, as Python
// tensordict writes its memmap directories: package tensordict's Memmap
// and LoadMemmap stand on it, and users never import it. Package memmap
// maps the tensor files; this package holds the rest.
//
// # meta.json
//
// Each node of a saved TensorDict is a directory with a meta.json. ReadMeta
// and ParseMeta read one whatever its JSON spacing, keeping member order and
// refusing files larger than MaxMetaSize; TensorDictMeta and NonTensorMeta
// interpret and write it, field for field as tensordict does with Python's
// standard json module (", " and ": " separators, ensure_ascii);
// NonTensorStackMeta does the same for a NonTensorStack node, which
// tensordict writes compact ("," and ":"). WriteMeta replaces a meta.json
// atomically. MarshalPython and Respace write JSON byte for byte as
// Python's json.dumps does.
//
// # File names
//
// EncodeKey and DecodeKey map entry keys to file names exactly as
// tensordict 0.13 and later do (percent-encoding of characters unsafe in
// file names); an encoded key never escapes its directory. LegacyName gives
// the unencoded name older versions used, when it is safe to look for.
// OpenRegular opens only regular files, never through symbolic links,
// never blocking on a named pipe; package memmap opens tensor files with
// it too.
//
// # Concurrent writers
//
// LockDir takes an advisory lock (flock) on a directory: package
// tensordict's Memmap holds it exclusively on every directory it writes,
// and LoadMemmap shared on the one it loads, so that saves into one
// directory take turns and a load sees one of them whole.
//
// Errors keep the "memmap:" prefix: they reach users through tensordict's
// Memmap and LoadMemmap, as errors of the memmap format.
//
// # Files
//
//	meta.go     Meta, ReadMeta, ParseMeta: the meta.json schema and its limits
//	            (MetaFile, MaxMetaSize), TensorDictMeta, Leaf, Entry,
//	            NonTensorMeta, NonTensorStackMeta; WriteMeta, SyncDir
//	key.go      EncodeKey, DecodeKey, LegacyName, KeyPath: tensordict's file
//	            names for keys
//	pyjson.go   MarshalPython, Respace: JSON written byte for byte as Python's
//	            json.dumps writes it
//	lock.go     DirLock, LockDir
//	open.go     OpenRegular, OpenError
package memmapdir
