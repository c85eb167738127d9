// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCatchFaultTruncatedMapping maps a file, truncates it, and reads the
// lost page: SIGBUS, which CatchFault turns into an error.
func TestCatchFaultTruncatedMapping(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "fault")
	require.NoError(t, err)
	defer f.Close()
	const n = 1 << 16
	require.NoError(t, f.Truncate(n))
	b, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(b)
	b[n-1] = 1
	require.NoError(t, f.Truncate(0))

	var sum byte
	err = CatchFault(func() error {
		sum += b[n-1]
		return nil
	})
	require.ErrorIs(t, err, ErrFault)
	var fe *FaultError
	require.ErrorAs(t, err, &fe)
	assert.NotZero(t, fe.Addr)

	err = CatchFault(func() error { copy(make([]byte, n), b); return nil })
	require.ErrorIs(t, err, ErrFault, "a fault inside memmove is caught too")
}

func TestCatchFaultPassesThrough(t *testing.T) {
	sentinel := errors.New("f's own error")
	require.ErrorIs(t, CatchFault(func() error { return sentinel }), sentinel)
	require.NoError(t, CatchFault(func() error { return nil }))
	assert.PanicsWithValue(t, "not a fault", func() {
		_ = CatchFault(func() error { panic("not a fault") })
	})
}

// TestReadableTruncatedMapping: Readable tells a mapping whose file was
// truncated from one still backed, at every truncation point that loses a
// page, and a file truncated inside the last page loses no page.
func TestReadableTruncatedMapping(t *testing.T) {
	page := os.Getpagesize()
	n := 4 * page
	tests := []struct {
		name  string
		size  int // file size after truncation
		fault bool
	}{
		{"untouched", n, false},
		{"inside the last page", 3*page + 1, false},
		{"at the last page", 3 * page, true},
		{"half", 2 * page, true},
		{"to nothing", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.CreateTemp(t.TempDir(), "readable")
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, f.Truncate(int64(n)))
			b, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			require.NoError(t, err)
			defer unix.Munmap(b)
			require.NoError(t, Readable(b))
			require.NoError(t, f.Truncate(int64(tt.size)))
			err = Readable(b)
			if tt.fault {
				require.ErrorIs(t, err, ErrFault)
			} else {
				require.NoError(t, err)
			}
			if tt.size > 0 {
				require.NoError(t, Readable(b[:page]), "the first page is still backed")
			}
		})
	}
	require.NoError(t, Readable(nil))
}

// TestPanicOnFault: a fault under PanicOnFault is a panic with a
// *FaultError naming the operation, which CatchFault returns; other panics
// are untouched.
func TestPanicOnFault(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "panic")
	require.NoError(t, err)
	defer f.Close()
	const n = 1 << 16
	require.NoError(t, f.Truncate(n))
	b, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(b)
	require.NoError(t, f.Truncate(0))

	err = CatchFault(func() error {
		PanicOnFault("test: Sum", func() { copy(make([]byte, n), b) })
		return errors.New("no fault")
	})
	require.ErrorIs(t, err, ErrFault)
	assert.Contains(t, err.Error(), "test: Sum: fault at address")

	func() {
		defer func() {
			r := recover()
			fe, ok := r.(*FaultError)
			require.True(t, ok, "recovered %v", r)
			assert.Equal(t, "test: Copy", fe.Op)
		}()
		PanicOnFault("test: Copy", func() { copy(make([]byte, n), b) })
	}()
	assert.PanicsWithValue(t, "not a fault", func() { PanicOnFault("x", func() { panic("not a fault") }) })
}
