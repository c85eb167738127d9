package memmap

import (
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// sharedMaps holds FromFile's shared (MAP_SHARED) mappings by file and
// length, so that a file mapped again while a mapping of it is in use
// (LoadMemmap of one directory in a loop, say, whose results are dropped
// without Release) reuses that mapping instead of adding one: two shared
// mappings of one file show the same pages, so the tensors cannot tell
// the difference, and the number of mappings stays bounded by the number
// of files. A mapping is unmapped when the last File using it is closed.
// A file replaced by another (a new save renamed over it) is a new file
// and gets a mapping of its own. Copy-on-write mappings are never shared.
var sharedMaps = struct {
	sync.Mutex
	m map[mapKey]*sharedMap
}{m: make(map[mapKey]*sharedMap)}

// mapKey identifies a mapping of the first n bytes of a file. A mapped
// file's inode stays allocated, so its number is not reused while the
// mapping exists.
type mapKey struct {
	dev, ino uint64
	n        int
}

// sharedMap is one shared mapping and the number of Files using it.
type sharedMap struct {
	key   mapKey
	data  []byte
	users int
}

// mapShared maps the first n bytes of fd, whose file is fi, into f shared,
// reusing a mapping of the same bytes of the same file if there is one.
func (f *File) mapShared(fd *os.File, fi fs.FileInfo, n int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return f.mapFd(fd, n, false)
	}
	key := mapKey{dev: uint64(st.Dev), ino: st.Ino, n: n}
	sharedMaps.Lock()
	defer sharedMaps.Unlock()
	if sm := sharedMaps.m[key]; sm != nil {
		sm.users++
		f.data, f.shared = sm.data, sm
		return nil
	}
	if err := f.mapFd(fd, n, false); err != nil {
		return err
	}
	f.shared = &sharedMap{key: key, data: f.data, users: 1}
	sharedMaps.m[key] = f.shared
	return nil
}

// drop ends one File's use of sm and reports whether it was the last, in
// which case sm is forgotten and the caller unmaps it.
func (sm *sharedMap) drop() bool {
	sharedMaps.Lock()
	defer sharedMaps.Unlock()
	if sm.users--; sm.users > 0 {
		return false
	}
	delete(sharedMaps.m, sm.key)
	return true
}
