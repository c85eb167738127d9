// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Tag is the MPI tag of every point-to-point message of init_remote over
// torch.distributed's "mpi" backend. Broadcasts have no tag. Both travel
// on Comm, with world ranks.
const Tag = 0

// Comm is the communicator of every message: torch's default process
// group on the "mpi" backend is the world itself.
const Comm = "MPI_COMM_WORLD"

// MaxCount is the largest message torch's MPI backend can send: it passes
// the element count as a C int, so a pickle or storage of 2^31 bytes or
// more cannot travel.
const MaxCount = math.MaxInt32

// Mode is how init_remote moves the TensorDict.
type Mode int

const (
	// P2P is init_remote(dst) and from_remote_init(src): three messages,
	// each an MPI_Isend completed by MPI_Wait on the sender and an
	// MPI_Irecv completed by MPI_Wait on the receiver, in order.
	P2P Mode = iota
	// Broadcast is init_remote(use_broadcast=True) and
	// from_remote_init(src, use_broadcast=True): three MPI_Bcast calls from
	// the sender's world rank that every rank of the world makes.
	Broadcast
)

func (m Mode) String() string {
	if m == Broadcast {
		return "broadcast"
	}
	return "point-to-point"
}

// Datatype is the MPI datatype torch uses for a message.
type Datatype string

// The two datatypes of the protocol. The element sizes are what matter:
// Open MPI matches MPI_INT64_T against MPI_LONG and MPI_BYTE against
// MPI_UNSIGNED_CHAR, which tdmpi's binding sends.
const (
	Long         Datatype = "MPI_LONG"          // 8 bytes on LP64 Linux
	UnsignedChar Datatype = "MPI_UNSIGNED_CHAR" // 1 byte
)

// Message is one of the three messages of a transfer.
type Message struct {
	Index int
	What  string
	// Send and Recv are torch's calls on each side: MPI_Isend and
	// MPI_Irecv, each completed by MPI_Wait before the next message, on
	// Tag of Comm; or MPI_Bcast on both sides, on Comm.
	Send, Recv string
	Datatype   Datatype
	Count      int64 // elements
	Bytes      int64
}

// Messages returns the three messages of a transfer in mode whose metadata
// pickle has pickleLen bytes and whose storage has total bytes, in the
// order they travel: torch's object-size tensor (one int64: pickleLen), the
// pickle, the storage.
func Messages(mode Mode, pickleLen, total int64) [3]Message {
	send, recv := "MPI_Isend", "MPI_Irecv"
	if mode == Broadcast {
		send, recv = "MPI_Bcast", "MPI_Bcast"
	}
	return [3]Message{
		{0, "length of the pickled metadata (int64[1])", send, recv, Long, 1, 8},
		{1, "pickled metadata dict", send, recv, UnsignedChar, pickleLen, pickleLen},
		{2, "consolidated storage", send, recv, UnsignedChar, total, total},
	}
}

// CheckCounts returns an error if a pickle of pickleLen bytes or a storage
// of total bytes cannot travel through torch's MPI backend (MaxCount).
func CheckCounts(pickleLen, total int64) error {
	switch {
	case pickleLen < 0 || pickleLen > MaxCount:
		return fmt.Errorf("torchwire: a metadata pickle of %d bytes cannot travel through torch's MPI backend (at most %d): %w", pickleLen, MaxCount, ErrLimit)
	case total < 0 || total > MaxCount:
		return fmt.Errorf("torchwire: a storage of %d bytes cannot travel through torch's MPI backend, which counts in a C int (at most %d): %w", total, MaxCount, ErrLimit)
	}
	return nil
}

// LengthMessage returns message 0 for a pickle of n bytes: n as one
// little-endian int64.
func LengthMessage(n int64) [1]int64 { return [1]int64{n} }

// ParseLength reads message 0 as raw bytes: 8 bytes, a little-endian int64
// in [0, max].
func ParseLength(b []byte, max int64) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("torchwire: length message of %d bytes, want 8: %w", len(b), ErrPickle)
	}
	return CheckLength(int64(binary.LittleEndian.Uint64(b)), max)
}

// CheckLength checks the pickle length n of message 0 against max.
func CheckLength(n, max int64) (int64, error) {
	if n <= 0 || n > max {
		return 0, fmt.Errorf("torchwire: the peer announces a metadata pickle of %d bytes, want 1 to %d: %w", n, max, ErrLimit)
	}
	return n, nil
}
