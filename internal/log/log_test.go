// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package log

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		out = append(out, m)
	}
	return out
}

// capture redirects the logger to a buffer at level lvl for one test.
func capture(t *testing.T, lvl zerolog.Level) *lockedBuffer {
	t.Helper()
	old := Level()
	var buf lockedBuffer
	SetOutput(&buf)
	SetLevel(lvl)
	t.Cleanup(func() {
		SetLevel(old)
		SetOutput(os.Stderr)
	})
	return &buf
}

func TestParseLevel(t *testing.T) {
	for _, test := range []struct {
		in      string
		want    zerolog.Level
		wantErr bool
	}{
		{"", zerolog.Disabled, false},
		{"off", zerolog.Disabled, false},
		{"debug", zerolog.DebugLevel, false},
		{" INFO ", zerolog.InfoLevel, false},
		{"warn", zerolog.WarnLevel, false},
		{"warning", zerolog.WarnLevel, false},
		{"error", zerolog.ErrorLevel, false},
		{"trace", zerolog.TraceLevel, false},
		{"loud", zerolog.ErrorLevel, true},
	} {
		got, err := ParseLevel(test.in)
		assert.Equal(t, test.want, got, "input %q", test.in)
		if test.wantErr {
			require.Error(t, err, "input %q", test.in)
			assert.Contains(t, err.Error(), "log: TDMPI_LOG=")
		} else {
			assert.NoError(t, err, "input %q", test.in)
		}
	}
}

func TestQuietByDefault(t *testing.T) {
	if os.Getenv(EnvLevel) != "" {
		t.Skipf("%s is set in the environment", EnvLevel)
	}
	assert.Equal(t, zerolog.Disabled, Level())
	var buf lockedBuffer
	SetOutput(&buf)
	t.Cleanup(func() { SetOutput(os.Stderr) })
	Logger().Error().Msg("not written")
	assert.Empty(t, buf.lines(t))
}

func TestFieldsOnEveryLine(t *testing.T) {
	buf := capture(t, zerolog.InfoLevel)
	SetRankSize(3, 4)
	Logger().Info().Str("k", "v").Msg("one")
	Logger().Debug().Msg("below the level")
	Logger().Warn().Msg("two")

	lines := buf.lines(t)
	require.Len(t, lines, 2)
	host, _ := os.Hostname()
	for i, m := range lines {
		assert.EqualValues(t, 3, m["rank"], "line %d", i)
		assert.EqualValues(t, 4, m["size"], "line %d", i)
		assert.Equal(t, host, m["host"], "line %d", i)
		assert.Contains(t, m, "time", "line %d", i)
	}
	assert.Equal(t, "one", lines[0]["message"])
	assert.Equal(t, "v", lines[0]["k"])
	assert.Equal(t, "warn", lines[1]["level"])
}

func TestSetBaseKeepsLevel(t *testing.T) {
	buf := capture(t, zerolog.WarnLevel)
	SetRankSize(0, 1)
	SetBase(zerolog.New(buf).With().Str("app", "x").Logger())
	Logger().Info().Msg("dropped")
	Logger().Error().Msg("kept")
	lines := buf.lines(t)
	require.Len(t, lines, 1)
	assert.Equal(t, "x", lines[0]["app"])
	assert.EqualValues(t, 0, lines[0]["rank"])
	assert.Equal(t, "kept", lines[0]["message"])
}

func TestConcurrentUse(t *testing.T) {
	buf := capture(t, zerolog.InfoLevel)
	SetRankSize(0, 100)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				if g == 0 && i%10 == 0 {
					SetRankSize(i, 100)
				}
				Logger().Info().Int("i", i).Msg("m")
			}
		})
	}
	wg.Wait()
	lines := buf.lines(t)
	assert.Len(t, lines, 400)
	for _, m := range lines {
		assert.Contains(t, m, "rank")
		assert.EqualValues(t, 100, m["size"])
	}
}
