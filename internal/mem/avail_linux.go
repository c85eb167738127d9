// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build linux

package mem

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysFiles are the files Available and Physical read: meminfo
// (/proc/meminfo), cgroup (/proc/self/cgroup) and, under root
// (/sys/fs/cgroup), the control groups' memory files.
type sysFiles struct{ meminfo, cgroup, root string }

// system are the files of this machine.
func system() sysFiles { return sysFiles{"/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup"} }

// Available returns how many bytes this process can still allocate, and
// where the figure comes from: MemAvailable of /proc/meminfo (free memory
// plus what the kernel can reclaim without swapping), lowered to the room
// left under the memory limit of the process's control group and of every
// group above it (cgroup v2 memory.max, or v1 memory.limit_in_bytes, minus
// the usage that cannot be reclaimed). ok is false if neither can be read.
func Available() (avail int64, source string, ok bool) { return system().available() }

func (s sysFiles) available() (avail int64, source string, ok bool) {
	if v, found := s.meminfoField("MemAvailable:"); found {
		avail, source, ok = v, "MemAvailable in "+s.meminfo, true
	}
	if room, dir, found := s.cgroupRoom(); found && (!ok || room < avail) {
		avail, source, ok = max(room, 0), "memory limit of cgroup "+dir, true
	}
	return avail, source, ok
}

// Physical returns the machine's memory (MemTotal), lowered to the memory
// limit of the process's control group, or 0 if neither can be read.
func Physical() int64 { return system().physical() }

func (s sysFiles) physical() int64 {
	total, _ := s.meminfoField("MemTotal:")
	if lim, found := s.cgroupLimit(); found && (total == 0 || lim < total) {
		total = lim
	}
	return total
}

// meminfoField returns the value, in bytes, of the /proc/meminfo line
// starting with name ("MemAvailable:"), whose value is in kB.
func (s sysFiles) meminfoField(name string) (int64, bool) {
	b, err := os.ReadFile(s.meminfo)
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		rest, found := bytes.CutPrefix(line, []byte(name))
		if !found {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) == 0 {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// cgroupDirs returns the memory controller directories of this process's
// control group and of its ancestors, innermost first, with the names of
// the limit, usage and statistics files and the statistics line that
// counts reclaimable page cache.
func (s sysFiles) cgroupDirs() (dirs []string, limit, usage, stat, inactive string) {
	f, err := os.Open(s.cgroup)
	if err != nil {
		return nil, "", "", "", ""
	}
	defer f.Close()
	var v1, v2 string
	hasV1, hasV2 := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, hasV2 = parts[2], true
		case hasController(parts[1], "memory"):
			v1, hasV1 = parts[2], true
		}
	}
	// A v1 memory controller, when mounted, is the one that limits.
	if hasV1 {
		if d := filepath.Join(s.root, "memory"); isDir(d) {
			return ancestors(d, v1), "memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat", "total_inactive_file"
		}
	}
	if hasV2 {
		return ancestors(s.root, v2), "memory.max", "memory.current", "memory.stat", "inactive_file"
	}
	return nil, "", "", "", ""
}

// hasController reports whether the comma-separated list has c.
func hasController(list, c string) bool {
	for x := range strings.SplitSeq(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// ancestors returns root/path and its parents up to root, innermost first,
// keeping only the directories that exist (inside a container the path
// of /proc/self/cgroup may name a directory the container does not see;
// its own root then stands for it).
func ancestors(root, path string) []string {
	var dirs []string
	p := filepath.Clean("/" + path)
	for {
		if d := filepath.Join(root, p); isDir(d) {
			dirs = append(dirs, d)
		}
		if p == "/" {
			return dirs
		}
		p = filepath.Dir(p)
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// cgroupLimit returns the lowest memory limit of this process's control
// group and its ancestors; found is false when there is none.
func (s sysFiles) cgroupLimit() (int64, bool) {
	dirs, limit, _, _, _ := s.cgroupDirs()
	var lowest int64
	found := false
	for _, d := range dirs {
		if v, ok := readLimit(filepath.Join(d, limit)); ok && (!found || v < lowest) {
			lowest, found = v, true
		}
	}
	return lowest, found
}

// cgroupRoom returns the least room (limit minus unreclaimable usage) of
// this process's control group and its ancestors, and the directory that
// has it; found is false when no group has a limit.
func (s sysFiles) cgroupRoom() (room int64, dir string, found bool) {
	dirs, limit, usage, stat, inactive := s.cgroupDirs()
	for _, d := range dirs {
		lim, ok := readLimit(filepath.Join(d, limit))
		if !ok {
			continue
		}
		used, ok := readInt(filepath.Join(d, usage))
		if !ok {
			continue
		}
		if cache, ok := statField(filepath.Join(d, stat), inactive); ok {
			used = max(used-cache, 0)
		}
		if r := lim - used; !found || r < room {
			room, dir, found = r, d, true
		}
	}
	return room, dir, found
}

// noLimit is the smallest value taken as "no limit": cgroup v1 writes a
// page-rounded 2^63-1.
const noLimit = 1 << 62

// readLimit reads a memory limit file: "max" (v2) or a value of 2^62 and
// above (v1) mean none.
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) == "max" {
		return 0, false
	}
	v, ok := parseInt(b)
	if !ok || v >= noLimit {
		return 0, false
	}
	return v, true
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseInt(b)
}

func parseInt(b []byte) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil && v >= 0
}

// statField returns the value of the line "name value" of a memory.stat
// file.
func statField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == name {
			return parseInt([]byte(f[1]))
		}
	}
	return 0, false
}
