// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProc returns the files of a fake /proc and /sys/fs/cgroup under a
// temporary directory, with the given files (path relative to it:
// content).
func fakeProc(t *testing.T, files map[string]string) sysFiles {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	return sysFiles{meminfo: filepath.Join(dir, "meminfo"), cgroup: filepath.Join(dir, "cgroup"), root: filepath.Join(dir, "sys")}
}

const meminfo23G = "MemTotal:       24117248 kB\nMemFree:        20971520 kB\nMemAvailable:   23068672 kB\n"

func TestAvailable(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		avail    int64
		physical int64
		ok       bool
	}{
		{name: "meminfo only", files: map[string]string{"meminfo": meminfo23G, "cgroup": "0::/\n"},
			avail: 22 << 30, physical: 23 << 30, ok: true},
		{name: "nothing readable", files: map[string]string{}, ok: false},
		{name: "cgroup v2 limit below", files: map[string]string{"meminfo": meminfo23G, "cgroup": "0::/job/step\n",
			"sys/job/memory.max": "4294967296\n", "sys/job/step/memory.max": "max\n",
			"sys/job/memory.current": "1073741824\n", "sys/job/memory.stat": "anon 1\ninactive_file 536870912\n",
			"sys/job/step/memory.current": "1\n"},
			avail: 4<<30 - 1<<30 + 512<<20, physical: 4 << 30, ok: true},
		{name: "cgroup v2 unlimited", files: map[string]string{"meminfo": meminfo23G, "cgroup": "0::/job\n",
			"sys/job/memory.max": "max\n", "sys/job/memory.current": "1\n"},
			avail: 22 << 30, physical: 23 << 30, ok: true},
		{name: "cgroup v1 as on this machine", files: map[string]string{"meminfo": meminfo23G,
			"cgroup": "4:memory:/api/x\n0::/\n", "sys/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/memory/api/x/memory.limit_in_bytes": "2147483648\n", "sys/memory/api/x/memory.usage_in_bytes": "1073741824\n",
			"sys/memory/api/x/memory.stat": "total_inactive_file 0\n"},
			avail: 1 << 30, physical: 2 << 30, ok: true},
		{name: "cgroup over its limit", files: map[string]string{"meminfo": meminfo23G, "cgroup": "0::/j\n",
			"sys/j/memory.max": "100\n", "sys/j/memory.current": "200\n"},
			avail: 0, physical: 100, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := fakeProc(t, tt.files)
			avail, src, ok := fs.available()
			require.Equal(t, tt.ok, ok, "source %q", src)
			assert.Equal(t, tt.avail, avail, "source %q", src)
			assert.Equal(t, tt.physical, fs.physical())
		})
	}
}

// TestCheckAvailable checks against this machine's figures: small
// requests pass unchecked, one of half what is available passes, one of
// twice the machine fails with a NoMemoryError saying how much and where
// the figure comes from, and AllocChecked refuses it too.
func TestCheckAvailable(t *testing.T) {
	avail, src, ok := Available()
	if !ok {
		t.Skip("SKIP: neither /proc/meminfo nor a cgroup memory limit is readable here")
	}
	require.NoError(t, CheckAvailable(CheckMin-1), "small requests are not checked")
	require.NoError(t, CheckAvailable(max(avail/2, CheckMin)), "source %s", src)
	huge := 2*Physical() + CheckMin
	err := CheckAvailable(huge)
	require.ErrorIs(t, err, ErrNoMemory)
	var ne *NoMemoryError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, huge, ne.Want)
	assert.Less(t, ne.Available, huge)
	assert.NotEmpty(t, ne.Source)
	assert.Contains(t, err.Error(), ne.Source)

	_, err = AllocChecked(int(huge))
	require.ErrorIs(t, err, ErrNoMemory)
	_, err = AllocChecked(-1)
	require.Error(t, err)
	b, err := AllocChecked(100)
	require.NoError(t, err)
	assert.Len(t, b, 100)
}

// TestAvailableHere checks the real files of this machine: a figure below
// the machine's memory, and a request of twice the machine refused.
func TestAvailableHere(t *testing.T) {
	avail, src, ok := Available()
	if !ok {
		t.Skip("SKIP: neither /proc/meminfo nor a cgroup memory limit is readable here")
	}
	phys := Physical()
	require.Positive(t, phys)
	assert.LessOrEqual(t, avail, phys, "source %s", src)
	require.ErrorIs(t, CheckAvailable(2*phys+CheckMin), ErrNoMemory)
}
