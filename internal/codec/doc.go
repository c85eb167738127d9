// Package codec is the consolidated-metadata codec of tdmpi: it writes and
// reads the JSON metadata tree of Python tensordict's consolidated format
// (cls, non_tensors, leaves as [dtype, shape, start, stop, pad],
// cls_metadata, one member per nested TensorDict), checks everything it
// reads against the limits a file or a peer may not exceed, and computes
// the one structure hash that peers compare.
//
// It works on neutral descriptions and does not import tensordict:
// tensordict walks its TensorDicts to call the metadata writer and to feed
// a Hasher, and builds TensorDicts from the Node tree that Decode returns.
//
// # Files
//
//   - encode.go: the metadata writer (AppendNodeStart, AppendLeaf and the
//     other Append functions: field order, leaf arrays, cls_metadata) and
//     AppendValue, the encoding of non-tensor values.
//     String escaping is internal/jsonesc's, shared with memmap.
//   - decode.go: Decode and Decoder, the reader of untrusted metadata into
//     a Node tree (Leaf, NonTensor, Child; a NonTensorStack node becomes a
//     NonTensor with a Stack of its parent), with every check: schema,
//     dtypes, shapes, byte ranges, overlaps, batch-size prefixes; Check
//     runs the same checks on a tree another reader built.
//   - json.go: the strict JSON tokenizer under the decoder (document order,
//     bounded depth, strings as substrings of one copy of the input).
//   - arena.go: the arenas that let a small tree decode in a handful of
//     allocations.
//   - limits.go: Limits and the default bounds (depth, entries, bytes,
//     key parts, non-tensor value depth).
//   - hash.go: Structure (the structure descriptor), Order, Hasher and the
//     structure hash, FNV64a, MetaStructure and MetaHash.
//   - key.go: Key (message formatting of keys) and CompareKeys, the sorted
//     key order.
//   - Tests: oracle_test.go is an independent reader on encoding/json's
//     tokenizer (jsontext_test.go adds jsontext's, GOEXPERIMENT=jsonv2) that
//     decode_test.go and the fuzz target compare Decode with, on the golden
//     corpus testdata/golden (written by tensordict's TestMetaEncodeGolden,
//     including the Python-written memmap fixture's TensorDict) and on the
//     fixtures' meta.json files; bench_test.go times the readers.
//
// # Writing metadata
//
// The writer is a set of functions that append the parts of the metadata
// to a buffer and return it, in Python tensordict's field order. The caller
// walks its tree and, for each node, appends
//
//	AppendNodeStart, AppendNonTensor for each non-tensor value,
//	AppendLeavesStart, AppendLeaf for each tensor leaf, AppendNodeMetadata,
//	then for each nested TensorDict AppendChild and the child's node, and
//	finally AppendNodeEnd
//
// which writes
//
//	{"cls":"TensorDict","non_tensors":{...},"leaves":{...},
//	 "cls_metadata":{"device":null,"names":[null...],"batch_size":[...],"is_locked":false},
//	 "child":{...},...}
//
// They do not allocate when the buffer has room (MetadataSize). A
// NonTensorStack entry is a member like a nested TensorDict, written with
// AppendStackStart and AppendStackMetadata (see AppendStackStart).
//
// # Errors
//
// Decode's errors name the key of what is wrong ("leaf a.b: ...", "key a:
// ...", "root: ...") and the JSON offset for syntax errors. An error caused
// by exceeding a limit matches wire.ErrLimit with errors.Is.
//
// # The JSON reader, decided by measurement
//
// json.go is a hand-written reader. It is kept because, in one run of
// BenchmarkReader (GOEXPERIMENT=jsonv2 go test -bench Reader, 2 shared
// cores, median CPU time per decode of 5), it is more than twice as fast
// as either library decoding the same metadata into the same Node tree
// with the same checks (oracle_test.go, jsontext_test.go):
//
//	metadata              hand      encoding/json (Token)   jsontext (ReadToken)
//	seed (667 B)          4.6 µs    32.4 µs (7.0x)          23.6 µs (5.1x)
//	10,000 leaves (~0.5M) 8.4 ms    30.1 ms (3.6x)          20.8 ms (2.5x)
//	allocations, seed     1         162                     91
//
// (jsontext is the tokenizer of encoding/json/v2, the standard library's
// copy of github.com/go-json-experiment/json, which is not on this
// project's module proxy; it was measured with AllowDuplicateNames, as the
// format allows repeated members.) The hand reader is held to the
// encoding/json oracle by TestDecodeMatchesOracle and
// FuzzDecodeMatchesOracle, and to jsontext's with GOEXPERIMENT=jsonv2.
//
// # Structure hash
//
// A structure is a batch size and the tensor leaves (key, dtype, shape) in
// an Order: StorageOrder, as the consolidated storage packs them, or
// SortedOrder, by key. Its hash is one function of the two (see hash.go);
// internal/wire documents which order each kind of message carries in
// Header.Hash.
package codec
