package memmapdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// OpenRegular opens the existing regular file path with flag (os.O_RDONLY
// or os.O_RDWR) for op, and returns it with its fstat information. Anything
// else is refused with an error naming path: a symbolic link (O_NOFOLLOW),
// a directory, a named pipe, a socket or a device. Package memmap maps
// tensor files it opens, ReadMeta reads meta.json through it.
//
// The file type is checked twice. Lstat refuses a non-regular file before
// it is opened, since opening some devices has side effects. The open
// itself uses O_NONBLOCK, so that a named pipe swapped in after the Lstat
// cannot block it waiting for a writer, and fstat of the opened descriptor
// is what decides. O_NONBLOCK has no effect on reading or mapping a regular
// file.
func OpenRegular(op, path string, flag int) (*os.File, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("memmap: %s: %w", op, err)
	}
	if err := checkRegular(op, path, fi); err != nil {
		return nil, nil, err
	}
	return openFstat(op, path, flag)
}

// openFstat is OpenRegular after its Lstat check: it opens path with
// O_NOFOLLOW and O_NONBLOCK, and keeps the file only if fstat of the
// descriptor says it is regular, whatever was at path when Lstat looked.
func openFstat(op, path string, flag int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, OpenError(op, path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("memmap: %s %s: %w", op, path, err)
	}
	if err := checkRegular(op, path, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// OpenError reports a failed open of path for op, naming symbolic links
// plainly.
func OpenError(op, path string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("memmap: %s %s: refusing to open a symbolic link", op, path)
	}
	return fmt.Errorf("memmap: %s: %w", op, err)
}

// errNotRegular is wrapped by the errors that refuse a file which is not a
// regular file.
var errNotRegular = errors.New("not a regular file")

// checkRegular returns an error naming path unless fi describes a regular
// file.
func checkRegular(op, path string, fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	if m&fs.ModeSymlink != 0 {
		return fmt.Errorf("memmap: %s %s: refusing to open a symbolic link", op, path)
	}
	return fmt.Errorf("memmap: %s %s: %w: it is %s", op, path, errNotRegular, fileKind(m))
}

// fileKind names the type of a file that is not regular, for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return fmt.Sprintf("of type %v", m.Type())
}
