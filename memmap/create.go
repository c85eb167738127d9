package memmap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/tensor"
)

// anonDirs are the directories tried, in order, for the unlinked file behind
// an anonymous mapping; os.TempDir is the fallback.
var anonDirs = []string{"/dev/shm"}

// FromTensor returns a memory-mapped copy of t.
//
// With a filename, the file is created (exclusively unless ExistsOK is given),
// filled with t's elements in row-major order, little-endian, with no header,
// exactly as tensordict's MemoryMappedTensor writes it, and mapped shared. A
// tensor with no elements creates no file. An empty filename gives an
// anonymous shared mapping backed by an unlinked file in /dev/shm when it has
// room, else in os.TempDir.
//
// If t is already memory-mapped to filename (or both are anonymous), t itself
// is returned, like tensordict does.
func FromTensor(t *tensor.Tensor, filename string, opts ...Option) (*tensor.Tensor, error) {
	if t == nil {
		panic("memmap: FromTensor: nil tensor")
	}
	if f, ok := Of(t); ok {
		if filename == "" && f.Anonymous() {
			return t, nil
		}
		if filename != "" {
			if abs, err := filepath.Abs(filename); err == nil && abs == f.path {
				if !t.IsContiguous() || t.Offset() != 0 {
					return nil, fmt.Errorf("memmap: FromTensor %s: the tensor is a strided or offset view of that same file; copy it first", abs)
				}
				return t, nil
			}
		}
	}
	src := t
	if src.Storage().Released() {
		return nil, fmt.Errorf("memmap: FromTensor: source tensor's storage was released")
	}
	nb := src.NBytes()
	f, fd, err := newFile(filename, nb, "FromTensor", collect(opts))
	if err != nil {
		return nil, err
	}
	if fd == nil {
		return f.newTensor(src.DType(), src.Shape())
	}
	defer fd.close()
	if src.IsContiguous() {
		// write(2) into the page cache is faster than faulting in fresh
		// pages of a mapping and copying into them.
		b, err := src.Bytes()
		if err != nil {
			return nil, cleanup(f, fd, fmt.Errorf("memmap: FromTensor: %w", err))
		}
		if _, err := fd.f.WriteAt(b, 0); err != nil {
			return nil, cleanup(f, fd, fmt.Errorf("memmap: FromTensor: writing %s: %w", f.describe(), err))
		}
	}
	if err := f.mapFd(fd.f, nb, false); err != nil {
		return nil, cleanup(f, fd, err)
	}
	out, err := f.newTensor(src.DType(), src.Shape())
	if err != nil {
		return nil, cleanup(f, fd, err)
	}
	if !src.IsContiguous() {
		if err := out.CopyFrom(src); err != nil {
			_ = out.Storage().Release()
			return nil, cleanup(f, fd, fmt.Errorf("memmap: FromTensor: %w", err))
		}
	}
	if err := fd.commit(f); err != nil {
		_ = out.Storage().Release()
		return nil, cleanup(f, fd, err)
	}
	return out, nil
}

// Empty returns a memory-mapped tensor of dtype dt and the given shape. Its
// file (see FromTensor for filename, anonymous mappings and ExistsOK) is
// sized with ftruncate, so its content is zero and its blocks are allocated
// lazily. A tensor with no elements creates no file.
func Empty(dt tensor.DType, filename string, shape []int, opts ...Option) (*tensor.Tensor, error) {
	nb, err := tensor.NBytesOf(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("memmap: Empty: %w", err)
	}
	f, fd, err := newFile(filename, nb, "Empty", collect(opts))
	if err != nil {
		return nil, err
	}
	if fd != nil {
		defer fd.close()
		if err := f.mapFd(fd.f, nb, false); err != nil {
			return nil, cleanup(f, fd, err)
		}
		if err := fd.commit(f); err != nil {
			return nil, cleanup(f, fd, err)
		}
	}
	return f.newTensor(dt, shape)
}

// Zeros returns a memory-mapped tensor of zeros. It is Empty: a new or
// truncated file reads as zeros.
func Zeros(dt tensor.DType, filename string, shape []int, opts ...Option) (*tensor.Tensor, error) {
	return Empty(dt, filename, shape, opts...)
}

// Full returns a memory-mapped tensor of dtype dt and the given shape with
// every element set to v, converted as tensor.Full converts it.
func Full(dt tensor.DType, v float64, filename string, shape []int, opts ...Option) (*tensor.Tensor, error) {
	if _, err := tensor.NBytesOf(dt, shape); err != nil {
		return nil, fmt.Errorf("memmap: Full: %w", err)
	}
	return FromTensor(tensor.Full(dt, v, shape...), filename, opts...)
}

// FromFile maps an existing file as a tensor of dtype dt and the given shape.
// The file holds the elements in row-major order, little-endian, with no
// header; it may be longer than the tensor (the extra bytes are ignored) but
// not shorter. A tensor with no elements needs no file.
//
// A file this process may write is mapped shared (MAP_SHARED): writes through
// the tensor reach the file, and writes by other processes that map it shared
// are visible. A read-only file, or any file with the Private option, is
// mapped copy-on-write (MAP_PRIVATE). A symbolic link is refused.
func FromFile(filename string, dt tensor.DType, shape []int, opts ...Option) (*tensor.Tensor, error) {
	o := collect(opts)
	nb, err := tensor.NBytesOf(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("memmap: FromFile %s: %w", filename, err)
	}
	abs, err := filepath.Abs(filename)
	if err != nil {
		return nil, fmt.Errorf("memmap: FromFile %s: %w", filename, err)
	}
	f := &File{path: abs}
	if nb == 0 {
		return f.newTensor(dt, shape)
	}
	private := o.private
	flag := os.O_RDWR
	if private {
		flag = os.O_RDONLY
	}
	fd, err := os.OpenFile(abs, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil && flag == os.O_RDWR && (errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)) {
		private = true
		fd, err = os.OpenFile(abs, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, openError("FromFile", abs, err)
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("memmap: FromFile: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("memmap: FromFile %s: not a regular file (%v)", abs, fi.Mode().Type())
	}
	if fi.Size() < int64(nb) {
		return nil, fmt.Errorf("memmap: FromFile %s: file has %d bytes, %v%v needs %d", abs, fi.Size(), dt, shape, nb)
	}
	if err := f.mapFd(fd, nb, private); err != nil {
		return nil, err
	}
	return f.newTensor(dt, shape)
}

// newFd is a file being made for a new tensor. When an existing file is
// overwritten (ExistsOK), the new content goes to a temporary file that
// commit renames over the old one, so that mappings of the old file stay
// valid and the old content is replaced all at once.
type newFd struct {
	f    *os.File
	tmp  string // temporary name to rename to the File's path, or ""
	path string
}

func (n *newFd) close() { n.f.Close() }

// commit puts the file in place: a no-op unless it replaces an existing one.
func (n *newFd) commit(f *File) error {
	if n.tmp == "" {
		return nil
	}
	if err := os.Rename(n.tmp, n.path); err != nil {
		return fmt.Errorf("memmap: replacing %s: %w", n.path, err)
	}
	n.tmp = ""
	return nil
}

// newFile prepares the File for a new tensor of nb bytes. For nb == 0 it
// creates nothing and returns a nil *newFd. Otherwise the file is open and
// sized to nb bytes: named files are created exclusively, or with
// o.existsOK written under a temporary name when the file exists; anonymous
// ones are unlinked at once.
func newFile(filename string, nb int, op string, o options) (*File, *newFd, error) {
	if filename == "" {
		f := &File{}
		if nb == 0 {
			return f, nil, nil
		}
		fd, err := anonFile(nb)
		if err != nil {
			return nil, nil, fmt.Errorf("memmap: %s: %w", op, err)
		}
		return f, &newFd{f: fd}, nil
	}
	abs, err := filepath.Abs(filename)
	if err != nil {
		return nil, nil, fmt.Errorf("memmap: %s %s: %w", op, filename, err)
	}
	f := &File{path: abs}
	if nb == 0 {
		// Like torch.from_file, nothing is created for an empty tensor; a
		// loader rebuilds it from its metadata.
		return f, nil, nil
	}
	nf, err := createFile(abs, op, o.existsOK)
	if err != nil {
		return nil, nil, err
	}
	if err := nf.f.Truncate(int64(nb)); err != nil {
		nf.f.Close()
		nf.remove()
		return nil, nil, fmt.Errorf("memmap: %s %s: sizing to %d bytes: %w", op, abs, nb, err)
	}
	return f, nf, nil
}

// remove deletes the file n created.
func (n *newFd) remove() {
	if n.tmp != "" {
		os.Remove(n.tmp)
	} else if n.path != "" {
		os.Remove(n.path)
	}
}

// createFile creates path exclusively (O_CREAT|O_EXCL), or, with existsOK
// and an existing regular file there, a temporary file beside it to be
// renamed over it. Symbolic links are refused.
func createFile(path, op string, existsOK bool) (*newFd, error) {
	const flags = os.O_RDWR | os.O_CREATE | os.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := os.OpenFile(path, flags, 0o666)
	if err == nil {
		return &newFd{f: fd, path: path}, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, openError(op, path, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("memmap: %s: %w", op, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("memmap: %s %s: refusing to write through a symbolic link", op, path)
	case !existsOK:
		return nil, fmt.Errorf("memmap: %s %s: file already exists (pass ExistsOK to overwrite)", op, path)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("memmap: %s %s: not a regular file (%v)", op, path, fi.Mode().Type())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("memmap: %s %s: %w", op, path, err)
	}
	return &newFd{f: tmp, tmp: tmp.Name(), path: path}, nil
}

// openError reports a failed open, naming symbolic links plainly.
func openError(op, path string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("memmap: %s %s: refusing to open a symbolic link", op, path)
	}
	return fmt.Errorf("memmap: %s: %w", op, err)
}

// anonFile returns an unlinked temporary file of n bytes, in /dev/shm when it
// has room, else in os.TempDir.
func anonFile(n int) (*os.File, error) {
	dir := os.TempDir()
	for _, d := range anonDirs {
		var st unix.Statfs_t
		if unix.Statfs(d, &st) == nil && st.Bavail*uint64(st.Bsize) >= uint64(n) {
			dir = d
			break
		}
	}
	fd, err := os.CreateTemp(dir, "tdmpi-memmap-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(fd.Name()); err != nil {
		fd.Close()
		return nil, err
	}
	if err := fd.Truncate(int64(n)); err != nil {
		fd.Close()
		return nil, fmt.Errorf("sizing anonymous mapping to %d bytes in %s: %w", n, dir, err)
	}
	return fd, nil
}

// mapFd maps the first n bytes of fd into f, shared or copy-on-write.
func (f *File) mapFd(fd *os.File, n int, private bool) error {
	flags := unix.MAP_SHARED
	if private {
		flags = unix.MAP_PRIVATE
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return fmt.Errorf("memmap: mmap %s (%d bytes): %w", f.describe(), n, err)
	}
	f.data = data
	f.private = private
	return nil
}

// cleanup undoes a half-made File after err: unmaps it and removes the file
// it created. It returns err.
func cleanup(f *File, fd *newFd, err error) error {
	_ = f.unmap()
	fd.remove()
	return err
}
