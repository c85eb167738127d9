// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/tensor"
)

// syncBuffer is a bytes.Buffer safe for the goroutines of IRecv.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// opLine is a start or failure line of an operation.
type opLine struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Op        string `json:"op"`
	GroupRank *int   `json:"group_rank"`
	GroupSize *int   `json:"group_size"`
	Dst       *int   `json:"dst"`
	Src       *int   `json:"src"`
	Root      *int   `json:"root"`
	Bytes     *int64 `json:"bytes"`
	Tag       *int   `json:"tag"`
	Error     string `json:"error"`
}

// captureLog sends the process log, at info level, to a buffer until the
// test ends, and returns a function that parses the lines written so far.
func captureLog(t *testing.T) func() []opLine {
	t.Helper()
	prev := log.Level()
	buf := &syncBuffer{}
	log.SetOutput(buf)
	log.SetLevel(zerolog.InfoLevel)
	t.Cleanup(func() {
		log.SetLevel(prev)
		log.SetOutput(os.Stderr)
	})
	return func() []opLine {
		buf.mu.Lock()
		defer buf.mu.Unlock()
		var out []opLine
		for line := range strings.SplitSeq(buf.b.String(), "\n") {
			var l opLine
			if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Message, "op ") {
				out = append(out, l)
			}
		}
		return out
	}
}

func TestOperationLogging(t *testing.T) {
	g := mpitest.Need(t, 2)
	r := g.Rank()
	lines := captureLog(t)
	td := New()
	require.NoError(t, td.Set(K("x"), tensor.Ones(tensor.Float32, 4)))

	var want []string
	if r <= 1 {
		peer := 1 - r
		if r == 0 {
			require.NoError(t, td.Send(peer, WithTag(3)))
			p, err := td.ISend(peer)
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			require.NoError(t, td.InitRemote(peer))
			want = append(want, "Send", "ISend", "InitRemote")
		} else {
			_, err := td.Recv(peer, WithTag(3), testCtx(t))
			require.NoError(t, err)
			p, err := td.IRecv(peer, testCtx(t))
			require.NoError(t, err)
			require.NoError(t, p.Wait())
			_, err = FromRemoteInit(peer, testCtx(t))
			require.NoError(t, err)
			want = append(want, "Recv", "IRecv", "FromRemoteInit")
		}
	}
	require.NoError(t, td.AllReduce(ReduceSum))
	_, err := td.Broadcast(0)
	require.NoError(t, err)
	want = append(want, "AllReduce", "Broadcast")
	// A failure: a rank out of range.
	require.Error(t, td.Send(g.Size()))

	got := lines()
	var starts []opLine
	var failed []opLine
	for _, l := range got {
		switch l.Message {
		case "op start":
			assert.Equal(t, "info", l.Level)
			starts = append(starts, l)
		case "op failed":
			assert.Equal(t, "error", l.Level)
			failed = append(failed, l)
		}
	}
	require.Len(t, starts, len(want), "start lines: %+v", got)
	for i, l := range starts {
		assert.Equal(t, want[i], l.Op)
		if assert.NotNil(t, l.GroupRank, l.Op) && assert.NotNil(t, l.GroupSize, l.Op) {
			assert.Equal(t, r, *l.GroupRank, l.Op)
			assert.Equal(t, g.Size(), *l.GroupSize, l.Op)
		}
	}
	if r <= 1 {
		s := starts[0]
		if r == 0 {
			require.NotNil(t, s.Dst)
			assert.Equal(t, 1, *s.Dst)
		} else {
			require.NotNil(t, s.Src)
			assert.Equal(t, 0, *s.Src)
		}
		if assert.NotNil(t, s.Tag) && assert.NotNil(t, s.Bytes) {
			assert.Equal(t, 3, *s.Tag)
			assert.Equal(t, int64(16), *s.Bytes)
		}
	}
	b := starts[len(starts)-1]
	if assert.NotNil(t, b.Root) {
		assert.Equal(t, 0, *b.Root)
	}
	assert.Equal(t, r == 0, b.Bytes != nil, "only the source of a Broadcast knows its bytes")
	require.Len(t, failed, 1, "failure lines: %+v", got)
	assert.Equal(t, "Send", failed[0].Op)
	assert.Contains(t, failed[0].Error, "out of range")
}

func TestOperationLoggingDisabledAllocatesNothing(t *testing.T) {
	g := mpitest.Need(t, 1)
	prev := log.Level()
	log.SetLevel(zerolog.Disabled)
	defer log.SetLevel(prev)
	l := xfer.Link{Op: "Send", Group: g, Peer: 0, Dir: "to"}
	allocs := testing.AllocsPerRun(100, func() {
		l.LogStart(64, 3)
		_ = xfer.LogFailed("Send", nil)
		xfer.LogCollStart("AllReduce", g, -1, nil)
	})
	assert.Zero(t, allocs)
	assert.False(t, xfer.InfoOn())
}
