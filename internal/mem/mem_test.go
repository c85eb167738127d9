// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mem

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var sizes = []int{0, 1, 7, 8, 9, 31, 4096, 4097, HugeMin - 1, HugeMin, HugeMin + 12345, 3 * hugePage}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestAllocIsZeroAndAligned(t *testing.T) {
	for _, n := range sizes {
		// Dirty the heap first so that a reused span would show if Alloc
		// failed to clear it.
		d := AllocUninit(max(n, 1))
		for i := range d {
			d[i] = 0xAB
		}
		d = nil
		runtime.GC()
		b := Alloc(n)
		require.Len(t, b, n)
		assert.Zero(t, addr(b)%8, "Alloc(%d) not 8-byte aligned", n)
		for i, v := range b {
			if v != 0 {
				t.Fatalf("Alloc(%d)[%d] = %#x, want 0", n, i, v)
			}
		}
	}
}

func TestAllocUninitUsable(t *testing.T) {
	for _, n := range sizes {
		b := AllocUninit(n)
		require.Len(t, b, n)
		assert.Zero(t, addr(b)%8, "AllocUninit(%d) not 8-byte aligned", n)
		for i := range b {
			b[i] = byte(i * 7)
		}
		runtime.GC() // b is still referenced: the collector must keep it
		for i := range b {
			if b[i] != byte(i*7) {
				t.Fatalf("AllocUninit(%d)[%d] changed across a collection", n, i)
			}
		}
	}
}

func TestNegativeSizePanics(t *testing.T) {
	assert.PanicsWithValue(t, "mem: Alloc: negative size", func() { Alloc(-1) })
	assert.PanicsWithValue(t, "mem: AllocUninit: negative size", func() { AllocUninit(-1) })
}

func TestHugeSpan(t *testing.T) {
	tests := []struct {
		name    string
		p       uintptr
		n       int
		off, ln int
	}{
		{"small", 1 << 30, HugeMin - 1, 0, 0},
		{"aligned exact", 1 << 30, HugeMin, 0, HugeMin},
		{"aligned with tail", 1 << 30, HugeMin + 4096, 0, HugeMin},
		{"unaligned start", 1<<30 + 8192, HugeMin, hugePage - 8192, hugePage},
		{"unaligned both", 1<<30 + 4096, 3*hugePage + 100, hugePage - 4096, 2 * hugePage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, n := hugeRange(tt.p, tt.n)
			assert.Equal(t, tt.off, off)
			assert.Equal(t, tt.ln, n)
			if n > 0 {
				assert.Zero(t, (tt.p+uintptr(off))%hugePage)
				assert.LessOrEqual(t, off+n, tt.n)
			}
		})
	}
}

var sink []byte

func benchAlloc(b *testing.B, f func(int) []byte) {
	const n = 64 << 20
	b.SetBytes(n)
	for b.Loop() {
		sink = f(n)
		sink[0], sink[n-1] = 1, 1
	}
}

// BenchmarkAlloc64MiB and BenchmarkAllocUninit64MiB compare a zeroed
// allocation with an uninitialised one of a receive buffer's size, when
// the collector recycles the previous one each time.
func BenchmarkAlloc64MiB(b *testing.B)       { benchAlloc(b, Alloc) }
func BenchmarkAllocUninit64MiB(b *testing.B) { benchAlloc(b, AllocUninit) }
