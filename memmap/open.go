package memmap

import (
	"errors"
	"io/fs"
	"syscall"
)

// ErrHardLink is wrapped by the error of FromFile (and so of a
// LoadMemmap) that refuses to map shared a file with more than one hard
// link; see HardLinks.
var ErrHardLink = errors.New("file has more than one hard link")

// links returns the number of hard links of the file fi describes (1 when
// the platform does not say).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
