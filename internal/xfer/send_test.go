// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// TestSend: rank 0 sends messages around the sizes Send copies
// (copySendMin to mpix.CopySendMax) to rank 1, which sleeps outside MPI
// before each receive, and overwrites its buffer once each Send returns:
// every message arrives as it was when sent, and a Send of a size it
// copies returns without waiting for the receiver (Open MPI over shared
// memory holds a blocking send of more than 256 bytes until then).
func TestSend(t *testing.T) {
	g := mpitest.Need(t, 2)
	c := proto.LibComm(g)
	defer func() { require.NoError(t, c.Barrier()) }()
	if g.Rank() > 1 {
		return
	}
	const asleep = 300 * time.Millisecond // the bound below is half of it: a loaded machine may deschedule a rank
	sizes := []int{1, copySendMin - 1, copySendMin, 1000, mpix.CopySendMax, mpix.CopySendMax + 1}
	content := func(i, n int) []byte { return bytes.Repeat([]byte{byte(3*i + 1)}, n) }
	for i, n := range sizes {
		name := fmt.Sprintf("%d bytes", n)
		if g.Rank() == 0 {
			buf := content(i, n)
			t0 := time.Now()
			require.NoError(t, Send(c, buf, 1, 7), name)
			took := time.Since(t0)
			copy(buf, content(i+1, n))
			if n >= copySendMin && n <= mpix.CopySendMax {
				assert.Less(t, took, asleep/2, "%s: Send waited for the receiver", name)
			}
			continue
		}
		time.Sleep(asleep)
		got := make([]byte, n)
		_, err := mpi.Recv(c, got, 0, 7)
		require.NoError(t, err, name)
		assert.True(t, bytes.Equal(content(i, n), got), "%s: content", name)
	}
}
