// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package log

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tdmpi/tdmpi/hpc"
)

// Environment variables read once, on first use of the logger.
const (
	EnvLevel  = "TDMPI_LOG"        // level: debug, info, warn, error, trace, off
	EnvFormat = "TDMPI_LOG_FORMAT" // "json" (the default) or "console"
)

var (
	current atomic.Pointer[zerolog.Logger]
	once    sync.Once

	mu    sync.Mutex // guards the fields below and rebuilding current
	base  zerolog.Logger
	rank  int
	size  int
	host  string
	level zerolog.Level
)

// setup builds the first logger from the environment.
func setup() {
	once.Do(func() {
		env := hpc.Detect()
		lvl, err := ParseLevel(os.Getenv(EnvLevel))
		if err != nil {
			lvl = zerolog.ErrorLevel
		}
		var out io.Writer = os.Stderr
		if strings.EqualFold(strings.TrimSpace(os.Getenv(EnvFormat)), "console") {
			out = zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true}
		}
		mu.Lock()
		defer mu.Unlock()
		base = zerolog.New(out).With().Timestamp().Logger()
		rank, size, host, level = env.Rank, env.Size, env.Host, lvl
		rebuild()
	})
}

// rebuild makes current from base and the fields. mu must be held.
func rebuild() {
	l := base.Level(level).With().Int("rank", rank).Int("size", size).Str("host", host).Logger()
	current.Store(&l)
}

// Logger returns the process logger. The pointer stays valid, but a later
// SetRankSize, SetLevel or SetOutput installs a new logger: call Logger for
// each message rather than keeping the result.
func Logger() *zerolog.Logger {
	if l := current.Load(); l != nil {
		return l
	}
	setup()
	return current.Load()
}

// SetRankSize sets the rank and size written on every line.
func SetRankSize(r, s int) {
	setup()
	mu.Lock()
	defer mu.Unlock()
	rank, size = r, s
	rebuild()
}

// SetLevel sets the lowest level written, overriding TDMPI_LOG.
func SetLevel(l zerolog.Level) {
	setup()
	mu.Lock()
	defer mu.Unlock()
	level = l
	rebuild()
}

// Level returns the lowest level written.
func Level() zerolog.Level {
	setup()
	mu.Lock()
	defer mu.Unlock()
	return level
}

// SetOutput sends lines to w, as JSON with a timestamp.
func SetOutput(w io.Writer) {
	SetBase(zerolog.New(w).With().Timestamp().Logger())
}

// SetBase replaces the underlying logger with l, for programs that have
// their own zerolog configuration. Rank, size and host are added to l's
// fields; the level set by TDMPI_LOG or SetLevel still applies.
func SetBase(l zerolog.Logger) {
	setup()
	mu.Lock()
	defer mu.Unlock()
	base = l
	rebuild()
}

// ParseLevel converts a TDMPI_LOG value to a level. The empty string, "off",
// "none" and "disabled" mean zerolog.Disabled. Case and surrounding space do
// not matter.
func ParseLevel(s string) (zerolog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "none", "disabled":
		return zerolog.Disabled, nil
	case "trace":
		return zerolog.TraceLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "info":
		return zerolog.InfoLevel, nil
	case "warn", "warning":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.ErrorLevel, fmt.Errorf("log: %s=%q: unknown level, want debug, info, warn, error or off", EnvLevel, s)
}
