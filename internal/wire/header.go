// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"encoding/binary"
	"fmt"
)

// Size is the length in bytes of an encoded header.
const Size = 64

// Version is the format version written by Append. Parse accepts only
// this version. Version 2: Hash is the one structure hash of
// internal/codec on every path (version 1 carried one of four values,
// depending on the path), so builds of the two versions refuse each
// other's headers instead of reporting false mismatches. Version 3: the
// last 8 bytes, reserved before, are Ref (FlagKeep, and FlagDescribed on
// an InitRemote frame).
const Version = 3

// magic opens every header.
var magic = [4]byte{'T', 'D', 'M', 'P'}

// MaxChunk is the largest chunk size a header may announce: 1 GiB, so that
// every chunk's byte count fits a C int.
const MaxChunk = 1 << 30

// Kind says which protocol a message belongs to.
type Kind uint8

// Message kinds.
const (
	KindInit      Kind = iota + 1 // InitRemote / FromRemoteInit
	KindSend                      // Send / Recv and their nonblocking forms
	KindBroadcast                 // broadcast and InitRemote in broadcast mode
	KindScatter                   // scatter
	KindGather                    // gather and all-gather
	KindReduce                    // reduce and all-reduce
	maxKind
)

var kindNames = [...]string{"invalid", "init", "send", "broadcast", "scatter", "gather", "reduce"}

// String returns the name of k, such as "init".
func (k Kind) String() string {
	if k < maxKind {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Flags qualify a message.
type Flags uint16

// Flag bits.
const (
	// FlagInline means the storage follows the metadata in the same
	// message instead of travelling in separate payload messages.
	FlagInline Flags = 1 << iota
	// FlagPerLeaf means the payload is one message per tensor leaf, in
	// tensordict's sorted depth-first order, instead of one storage.
	FlagPerLeaf
	// FlagPseudoRandTags means per-leaf messages use pseudo-random tags.
	FlagPseudoRandTags
	// FlagConsolidated means the payload is the consolidated storage.
	FlagConsolidated
	// FlagDescribed means the frame carries no metadata and no class name
	// (MetaLen and ClassLen are 0). On a Send frame, the sender described
	// the same structure, with the same structure hash, in an earlier
	// transfer to the same rank on the same tag, and the header's hash
	// and leaf count stand for it. On an InitRemote frame, the class name
	// and metadata are those of the earlier frame from the same sender
	// that FlagKeep kept under Ref, and Hash, Leaves and Total are that
	// frame's.
	FlagDescribed
	// FlagKeep, on an InitRemote frame with metadata of at most
	// MaxKeptMeta bytes, asks the receiver to keep its class name and
	// metadata under Ref (replacing what it kept under a Ref equal modulo
	// KeptRefs), for later frames with FlagDescribed from the same sender.
	FlagKeep
	// FlagRuns means the separate payload of an InitRemote frame travels
	// as runs (see Runs), one message each, rather than in chunks of the
	// storage, and Chunk is the number of runs: the sender reads its
	// large leaves in place instead of packing them first.
	FlagRuns

	knownFlags = FlagInline | FlagPerLeaf | FlagPseudoRandTags | FlagConsolidated | FlagDescribed | FlagKeep | FlagRuns
)

// KeptRefs is the number of InitRemote structures a receiver keeps for
// each sender (FlagKeep): what it kept under Ref r is replaced by the
// next one kept under a Ref equal to r modulo KeptRefs.
const KeptRefs = 8

// MaxKeptMeta is the longest metadata, with the class name, that FlagKeep
// may ask a receiver to keep: KeptRefs of them per sender bound what a
// receiver holds.
const MaxKeptMeta = 64 << 10

// Header is the decoded form of a message header.
type Header struct {
	Kind  Kind
	Flags Flags
	// Total is the size in bytes of the consolidated storage.
	Total int64
	// MetaLen is the length in bytes of the metadata that follows the
	// header and the class name.
	MetaLen int64
	// ClassLen is the length in bytes of the tensorclass name that follows
	// the header; 0 for a plain TensorDict.
	ClassLen int
	// PayloadTag is the MPI tag of the payload messages (or the first
	// per-leaf tag).
	PayloadTag int
	// Hash is the structure hash of the sender's TensorDict
	// (codec.Structure.Hash, one function, FNV-1a over keys, dtypes and
	// shapes), with the leaf order the transfer depends on:
	//
	//   - FlagConsolidated (KindInit, KindBroadcast, and Send with
	//     WithConsolidated): codec.StorageOrder with the batch size, the
	//     value of TensorDict.Signature and of StructureHash of the
	//     metadata, since the storage's bytes are laid out in that order;
	//   - FlagPerLeaf: codec.SortedOrder without the batch size (hashed as
	//     empty), since per-leaf messages match leaves by sorted key and
	//     each leaf is received into a tensor of the receiver's own.
	//
	// A receiver that holds a TensorDict to receive into (Recv) compares it
	// with its own and explains a difference from the metadata; the
	// receivers of KindInit and KindBroadcast build from the metadata and
	// need not check it.
	Hash uint64
	// Chunk is the largest payload message in bytes; 0 when there is no
	// separate payload.
	Chunk int64
	// Leaves is the number of tensor leaves.
	Leaves int64
	// Ref numbers the structure of an InitRemote frame that the receiver
	// keeps (FlagKeep) or that stands for this frame's (FlagDescribed);
	// 0 otherwise.
	Ref uint64
}

// Body returns the number of bytes that follow the header in its frame:
// the class name, the metadata and, with FlagInline, the storage. It is
// only meaningful for a header that Parse accepted or that Check accepts.
func (h *Header) Body() int64 {
	n := int64(h.ClassLen) + h.MetaLen
	if h.Flags&FlagInline != 0 {
		n += h.Total
	}
	return n
}

// Chunks returns the number of separate payload messages of the storage:
// 0 when it is inline or empty, Chunk with FlagRuns, else
// ceil(Total/Chunk).
func (h *Header) Chunks() int64 {
	switch {
	case h.Flags&FlagInline != 0 || h.Total == 0 || h.Chunk <= 0:
		return 0
	case h.Flags&FlagRuns != 0:
		return h.Chunk
	}
	return (h.Total + h.Chunk - 1) / h.Chunk
}

// Append appends the encoding of h to b and returns the extended slice. It
// does not allocate when b has room for Size more bytes. Append does not
// validate h; senders call Check first when h is built from user input.
func Append(b []byte, h *Header) []byte {
	n := len(b)
	b = grow(b, Size)
	p := b[n : n+Size]
	copy(p[0:4], magic[:])
	p[4] = Version
	p[5] = byte(h.Kind)
	binary.LittleEndian.PutUint16(p[6:], uint16(h.Flags))
	binary.LittleEndian.PutUint64(p[8:], uint64(h.Total))
	binary.LittleEndian.PutUint64(p[16:], uint64(h.MetaLen))
	binary.LittleEndian.PutUint32(p[24:], uint32(h.ClassLen))
	binary.LittleEndian.PutUint32(p[28:], uint32(int32(h.PayloadTag)))
	binary.LittleEndian.PutUint64(p[32:], h.Hash)
	binary.LittleEndian.PutUint64(p[40:], uint64(h.Chunk))
	binary.LittleEndian.PutUint64(p[48:], uint64(h.Leaves))
	binary.LittleEndian.PutUint64(p[56:], h.Ref)
	return b
}

// Put writes the encoding of h into the first Size bytes of b, which must
// be at least Size long.
func Put(b []byte, h *Header) {
	if len(b) < Size {
		panic(fmt.Sprintf("wire: Put: buffer of %d bytes, need %d", len(b), Size))
	}
	Append(b[:0:Size], h)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*len(b)+n)
	copy(nb, b)
	return nb
}

// Parse decodes the header at the start of b and checks it against lim.
// Bytes after the header are ignored. Any error is a *HeaderError.
func Parse(b []byte, lim Limits) (Header, error) {
	if len(b) < Size {
		return Header{}, &HeaderError{Field: "length", Reason: fmt.Sprintf("%d bytes, a header is %d", len(b), Size)}
	}
	if [4]byte(b[0:4]) != magic {
		return Header{}, &HeaderError{Field: "magic", Reason: fmt.Sprintf("%q, want %q", b[0:4], magic[:])}
	}
	if b[4] != Version {
		return Header{}, &HeaderError{Field: "version", Reason: fmt.Sprintf("%d, this build reads version %d", b[4], Version)}
	}
	h := Header{
		Kind:       Kind(b[5]),
		Flags:      Flags(binary.LittleEndian.Uint16(b[6:])),
		Total:      int64(binary.LittleEndian.Uint64(b[8:])),
		MetaLen:    int64(binary.LittleEndian.Uint64(b[16:])),
		ClassLen:   int(binary.LittleEndian.Uint32(b[24:])),
		PayloadTag: int(int32(binary.LittleEndian.Uint32(b[28:]))),
		Hash:       binary.LittleEndian.Uint64(b[32:]),
		Chunk:      int64(binary.LittleEndian.Uint64(b[40:])),
		Leaves:     int64(binary.LittleEndian.Uint64(b[48:])),
		Ref:        binary.LittleEndian.Uint64(b[56:]),
	}
	if err := h.Check(lim); err != nil {
		return Header{}, err
	}
	return h, nil
}

// Check reports whether every field of h is valid and within lim.
func (h *Header) Check(lim Limits) error {
	lim = lim.withDefaults()
	bad := func(field, format string, args ...any) error {
		return &HeaderError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case h.Kind == 0 || h.Kind >= maxKind:
		return bad("kind", "%d is not a known message kind", uint8(h.Kind))
	case h.Flags&^knownFlags != 0:
		return bad("flags", "unknown bits %#x", uint16(h.Flags&^knownFlags))
	case h.Total < 0:
		return bad("total", "negative size %d", h.Total)
	case h.Total > lim.MaxTotal:
		return &LimitError{Field: "total", Value: h.Total, Limit: lim.MaxTotal}
	case h.MetaLen < 0:
		return bad("metadata length", "negative size %d", h.MetaLen)
	case h.MetaLen > lim.MaxMeta:
		return &LimitError{Field: "metadata length", Value: h.MetaLen, Limit: lim.MaxMeta}
	case h.ClassLen < 0:
		return bad("class name length", "negative size %d", h.ClassLen)
	case h.ClassLen > lim.MaxClass:
		return &LimitError{Field: "class name length", Value: int64(h.ClassLen), Limit: int64(lim.MaxClass)}
	case h.PayloadTag < 0:
		return bad("payload tag", "negative tag %d", h.PayloadTag)
	case h.Chunk < 0 || h.Chunk > MaxChunk:
		return bad("chunk size", "%d outside [0, %d]", h.Chunk, MaxChunk)
	case h.Leaves < 0:
		return bad("leaves", "negative count %d", h.Leaves)
	case h.Flags&FlagDescribed != 0 && (h.MetaLen != 0 || h.ClassLen != 0):
		return bad("flags", "a described %v frame with %d bytes of metadata and a class name of %d", h.Kind, h.MetaLen, h.ClassLen)
	case h.Flags&FlagDescribed != 0 && h.Kind != KindSend && h.Kind != KindInit:
		return bad("flags", "a described %v frame: only Send and InitRemote frames may be", h.Kind)
	case h.Flags&FlagKeep != 0 && (h.Kind != KindInit || h.Flags&FlagDescribed != 0):
		return bad("flags", "a %v frame to keep (described: %t): only an InitRemote frame with metadata may be", h.Kind, h.Flags&FlagDescribed != 0)
	case h.Flags&FlagKeep != 0 && h.MetaLen+int64(h.ClassLen) > MaxKeptMeta:
		return &LimitError{Field: "metadata to keep", Value: h.MetaLen + int64(h.ClassLen), Limit: MaxKeptMeta}
	case (h.Ref != 0) != (h.Kind == KindInit && h.Flags&(FlagKeep|FlagDescribed) != 0):
		return bad("ref", "%d on a %v frame with flags %#x: an InitRemote frame to keep or described has one, no other frame", h.Ref, h.Kind, uint16(h.Flags))
	case h.Flags&FlagRuns != 0 && (h.Kind != KindInit || h.Flags&(FlagInline|FlagPerLeaf) != 0 || h.Total == 0):
		return bad("flags", "runs on a %v frame with flags %#x and %d bytes of storage: only an InitRemote frame with a separate payload has them", h.Kind, uint16(h.Flags), h.Total)
	case h.Flags&FlagRuns != 0 && (h.Chunk < 1 || h.Chunk > maxRuns(h.Leaves, h.Total)):
		return bad("chunk size", "%d runs for %d leaves and %d bytes, outside [1, %d]", h.Chunk, h.Leaves, h.Total, maxRuns(h.Leaves, h.Total))
	case h.Leaves > h.MetaLen && h.Flags&FlagPerLeaf != 0 && h.Flags&FlagDescribed == 0:
		// Each leaf takes more than one byte of metadata.
		return bad("leaves", "%d leaves cannot fit in %d bytes of metadata", h.Leaves, h.MetaLen)
	}
	if h.Flags&FlagInline != 0 {
		if h.Total > lim.MaxInline {
			return &LimitError{Field: "inline storage", Value: h.Total, Limit: lim.MaxInline}
		}
	} else if h.Total > 0 && h.Flags&FlagPerLeaf == 0 && h.Chunk == 0 {
		return bad("chunk size", "0 for a separate payload of %d bytes", h.Total)
	}
	return nil
}
