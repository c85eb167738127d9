// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"sync"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// Default limits.
const (
	DefaultMaxTotal  = 64 << 30 // 64 GiB of storage, lowered to the machine's memory (MachineMaxTotal)
	DefaultMaxMeta   = 64 << 20 // 64 MiB of metadata
	DefaultMaxClass  = 4 << 10  // 4 KiB tensorclass name
	DefaultMaxInline = 64 << 20 // 64 MiB of storage inside the header message
)

// MachineMaxTotal returns the default MaxTotal on this machine:
// DefaultMaxTotal, or the machine's physical memory (bounded by the
// process's cgroup limit, see mem.Physical) when that is smaller, since a
// storage larger than the machine cannot be received into memory. It is
// read once per process.
func MachineMaxTotal() int64 { return machineMaxTotal() }

var machineMaxTotal = sync.OnceValue(func() int64 {
	if p := mem.Physical(); p > 0 && p < DefaultMaxTotal {
		return p
	}
	return DefaultMaxTotal
})

// Limits bound what a received header may announce. A zero or negative
// field takes its default (MaxTotal: MachineMaxTotal); a receiver lowers them (or raises MaxTotal) to
// suit its memory. MaxMeta and MaxInline are capped at MaxChunk and
// MaxClass at 1 MiB, since each travels in one message.
type Limits struct {
	MaxTotal  int64 // largest storage, in bytes
	MaxMeta   int64 // largest metadata, in bytes
	MaxClass  int   // longest tensorclass name, in bytes
	MaxInline int64 // largest storage carried inside the header message
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

// Resolve returns l with its zero fields set to their defaults and the
// caps applied: the limits Parse actually enforces.
func (l Limits) Resolve() Limits { return l.withDefaults() }

// MaxFrame returns the longest header message l allows when at most
// inlineMax bytes of storage travel in it: the header, the longest class
// name and metadata, and that storage.
func (l Limits) MaxFrame(inlineMax int64) int64 {
	l = l.withDefaults()
	return int64(Size) + int64(l.MaxClass) + l.MaxMeta + min(l.MaxInline, inlineMax)
}

func (l Limits) withDefaults() Limits {
	if l.MaxTotal <= 0 {
		l.MaxTotal = machineMaxTotal()
	}
	if l.MaxMeta <= 0 {
		l.MaxMeta = DefaultMaxMeta
	}
	if l.MaxClass <= 0 {
		l.MaxClass = DefaultMaxClass
	}
	if l.MaxInline <= 0 {
		l.MaxInline = DefaultMaxInline
	}
	l.MaxMeta = min(l.MaxMeta, MaxChunk)
	l.MaxInline = min(l.MaxInline, MaxChunk)
	l.MaxClass = min(l.MaxClass, 1<<20)
	return l
}
