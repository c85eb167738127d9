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
