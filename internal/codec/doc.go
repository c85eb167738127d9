// Package codec is the consolidated-metadata codec of tdmpi: it writes and
// reads the JSON metadata tree of Python tensordict's consolidated format
// (cls, non_tensors, leaves as [dtype, shape, start, stop, pad],
// cls_metadata, one member per nested TensorDict), checks everything it
// reads against the limits a file or a peer may not exceed, and computes
// the one structure hash that peers compare.
//
// It works on neutral descriptions and does not import tensordict:
// tensordict walks its TensorDicts to drive a Writer and to feed a Hasher,
// and builds TensorDicts from the Node tree that Decode returns.
//
// # Files
//
//   - encode.go: Writer, the metadata writer (field order, leaf arrays,
//     cls_metadata) and AppendValue, the encoding of non-tensor values.
//     String escaping is internal/jsonesc's, shared with memmap.
//   - decode.go: Decode and Decoder, the reader of untrusted metadata into
//     a Node tree (Leaf, NonTensor, Child), with every check: schema,
//     dtypes, shapes, byte ranges, overlaps, batch-size prefixes.
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
//
// # Errors
//
// Decode's errors name the key of what is wrong ("leaf a.b: ...", "key a:
// ...", "root: ...") and the JSON offset for syntax errors. An error caused
// by exceeding a limit matches wire.ErrLimit with errors.Is.
//
// # Structure hash
//
// A structure is a batch size and the tensor leaves (key, dtype, shape) in
// an Order: StorageOrder, as the consolidated storage packs them, or
// SortedOrder, by key. Its hash is one function of the two (see hash.go);
// internal/wire documents which order each kind of message carries in
// Header.Hash.
package codec
