package memmap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/internal/memmapdir"
	"github.com/tdmpi/tdmpi/tensor"
)

// shmDir is where the unlinked file behind an anonymous mapping goes when
// it has room: Linux's shared memory, which no disk backs; os.TempDir is
// the fallback.
const shmDir = "/dev/shm"

// FromTensor returns a memory-mapped copy of t.
//
// With a filename, the file is created (exclusively unless ExistsOK is given),
// filled with t's elements in row-major order, little-endian, with no header,
// exactly as tensordict's MemoryMappedTensor writes it, and mapped shared. A
// tensor with no elements creates no file. Every block of the file is
// allocated before FromTensor returns: a full file system is an error
// wrapping syscall.ENOSPC that names the file, which is removed. An empty filename gives an
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
		return nil, fmt.Errorf("memmap: FromTensor: source tensor's %w", tensor.ErrReleased)
	}
	nb := src.NBytes()
	contiguous := src.IsContiguous()
	fill := reserve
	if contiguous {
		// write(2) into the page cache is faster than faulting in fresh
		// pages of a mapping and copying into them, and it allocates
		// every block of the file, so a full file system is an error
		// here.
		b, err := src.Bytes()
		if err != nil {
			return nil, fmt.Errorf("memmap: FromTensor: %w", err)
		}
		fill = func(fd *os.File, _ int) error { return writeAll(fd, b) }
	}
	f, fd, err := newFile(filename, nb, "FromTensor", collect(opts), fill)
	if err != nil {
		return nil, err
	}
	if fd == nil {
		return f.newTensor(src.DType(), src.Shape())
	}
	defer fd.close()
	if err := f.mapFd(fd.f, nb, false); err != nil {
		return nil, cleanup(f, fd, err)
	}
	out, err := f.newTensor(src.DType(), src.Shape())
	if err != nil {
		return nil, cleanup(f, fd, err)
	}
	if !contiguous {
		// The blocks were reserved by newFile: stores into the mapping
		// cannot meet a full file system (which would raise SIGBUS).
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
// file (see FromTensor for filename, anonymous mappings and ExistsOK) reads
// as zeros. Its blocks are reserved when it is created (fallocate, or
// writing zeros on file systems without it), so a full file system is an
// error wrapping syscall.ENOSPC here, and the created file is removed,
// rather than a SIGBUS on a later store into the mapping. A tensor with no
// elements creates no file.
func Empty(dt tensor.DType, filename string, shape []int, opts ...Option) (*tensor.Tensor, error) {
	nb, err := tensor.NBytesOf(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("memmap: Empty: %w", err)
	}
	return create("Empty", dt, filename, shape, nb, opts, reserve)
}

// create makes the file of a new tensor of dtype dt, shape and nb bytes
// with fill (see newFile), maps it and returns the tensor that views it.
func create(op string, dt tensor.DType, filename string, shape []int, nb int, opts []Option, fill func(*os.File, int) error) (*tensor.Tensor, error) {
	f, fd, err := newFile(filename, nb, op, collect(opts), fill)
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
// every element set to v, converted as tensor.Full converts it. The file
// is written as Empty reserves it (a full file system is an error wrapping
// syscall.ENOSPC), without a copy of the tensor in memory. It returns an
// error for a bad dtype or shape, and for a v that dt cannot hold (NaN or
// ±Inf into an integer dtype, 1e10 into int32), where tensor.Full panics.
func Full(dt tensor.DType, v float64, filename string, shape []int, opts ...Option) (*tensor.Tensor, error) {
	nb, err := tensor.NBytesOf(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("memmap: Full: %w", err)
	}
	elem, err := tensor.New(dt)
	if err == nil {
		err = elem.Fill(v)
	}
	if err != nil {
		return nil, fmt.Errorf("memmap: Full: %w", err)
	}
	e, err := elem.Bytes()
	if err != nil {
		return nil, fmt.Errorf("memmap: Full: %w", err)
	}
	fill := reserve
	if slices.ContainsFunc(e, func(c byte) bool { return c != 0 }) {
		fill = func(fd *os.File, n int) error {
			// Reserved first, a file too large for the disk fails at
			// once rather than after writing what fits.
			if err := reserve(fd, n); err != nil {
				return err
			}
			return writeRepeated(fd, n, e)
		}
	}
	return create("Full", dt, filename, shape, nb, opts, fill)
}

// FromFile maps an existing file as a tensor of dtype dt and the given shape.
// The file holds the elements in row-major order, little-endian, with no
// header; it may be longer than the tensor (the extra bytes are ignored) but
// not shorter. A tensor with no elements needs no file.
//
// A file this process may write is mapped shared (MAP_SHARED): writes through
// the tensor reach the file, and writes by other processes that map it shared
// are visible. A file mapped shared again while an earlier shared mapping
// of the same bytes is in use reuses that mapping (the pages are the same),
// so loading one file many times without Close adds no mappings. A
// read-only file, or any file with the Private option, is
// mapped copy-on-write (MAP_PRIVATE). A file with more than one hard link
// is refused for a shared mapping (an error wrapping ErrHardLink) unless
// the HardLinks option is given; with Private it is mapped. A symbolic
// link is refused, and so is
// anything that is not a regular file (a directory, a named pipe, a device),
// without waiting on it.
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
	fd, fi, err := memmapdir.OpenRegular("FromFile", abs, flag)
	if err != nil && flag == os.O_RDWR && (errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)) {
		private = true
		fd, fi, err = memmapdir.OpenRegular("FromFile", abs, os.O_RDONLY)
	}
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if fi.Size() < int64(nb) {
		return nil, fmt.Errorf("memmap: FromFile %s: file has %d bytes, %v%v needs %d", abs, fi.Size(), dt, shape, nb)
	}
	if n := links(fi); n > 1 && !private && !o.hardLinks {
		return nil, fmt.Errorf("memmap: FromFile %s: %w: the file has %d names, and writes through a shared mapping would change it under the others (pass Private, or HardLinks if that is intended)", abs, ErrHardLink, n)
	}
	if private {
		if err := f.mapFd(fd, nb, true); err != nil {
			return nil, err
		}
	} else if err := f.mapShared(fd, fi, nb); err != nil {
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
// fill has given it its nb bytes (by writing them, or by reserve): named
// files are created exclusively, or with o.existsOK written under a
// temporary name when the file exists; anonymous ones are unlinked at once.
// If fill fails, the file is removed and the error names it.
func newFile(filename string, nb int, op string, o options, fill func(*os.File, int) error) (*File, *newFd, error) {
	if filename == "" {
		f := &File{}
		if nb == 0 {
			return f, nil, nil
		}
		fd, err := anonFile(shmDir, os.TempDir(), nb, fill)
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
	if err := fill(nf.f, nb); err != nil {
		nf.f.Close()
		nf.remove()
		return nil, nil, fmt.Errorf("memmap: %s %s: %w", op, abs, err)
	}
	return f, nf, nil
}

// reserve makes fd, a new empty file, n bytes long with every block
// allocated, so that stores into a shared mapping of it cannot fail for
// want of space. It uses fallocate, and writes zeros where the file system
// does not support fallocate (see afterFallocate). A full file system is
// an error wrapping syscall.ENOSPC.
func reserve(fd *os.File, n int) error {
	for {
		err := unix.Fallocate(int(fd.Fd()), 0, 0, int64(n))
		if !errors.Is(err, unix.EINTR) {
			return afterFallocate(fd, n, err)
		}
	}
}

// afterFallocate ends reserve of n bytes of fd once fallocate returned
// err: nothing more to do when it succeeded, zeros written in full (which
// allocates the blocks) where the file system does not support fallocate
// (EOPNOTSUPP, ENOSYS), and any other error returned.
func afterFallocate(fd *os.File, n int, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return writeZeros(fd, n)
	}
	return fmt.Errorf("reserving %d bytes: fallocate: %w", n, err)
}

// zeroChunk is what writeZeros writes, a chunk at a time. It is never
// written to.
var zeroChunk [256 << 10]byte

// writeZeros writes n zero bytes at the start of fd with pwrite.
func writeZeros(fd *os.File, n int) error {
	for off := 0; off < n; {
		c := min(n-off, len(zeroChunk))
		if _, err := fd.WriteAt(zeroChunk[:c], int64(off)); err != nil {
			return fmt.Errorf("reserving %d bytes: writing zeros at offset %d: %w", n, off, err)
		}
		off += c
	}
	return nil
}

// writeRepeated writes n bytes at the start of fd with pwrite: e over and
// over (n is a multiple of len(e), which divides len(zeroChunk)).
func writeRepeated(fd *os.File, n int, e []byte) error {
	chunk := make([]byte, min(n, len(zeroChunk)))
	for filled := copy(chunk, e); filled < len(chunk); filled *= 2 {
		copy(chunk[filled:], chunk[:filled])
	}
	for off := 0; off < n; {
		c := min(n-off, len(chunk))
		if _, err := fd.WriteAt(chunk[:c], int64(off)); err != nil {
			return fmt.Errorf("writing %d bytes at offset %d: %w", n, off, err)
		}
		off += c
	}
	return nil
}

// writeAll writes b at the start of fd with pwrite.
func writeAll(fd *os.File, b []byte) error {
	if _, err := fd.WriteAt(b, 0); err != nil {
		return fmt.Errorf("writing %d bytes: %w", len(b), err)
	}
	return nil
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
		return nil, memmapdir.OpenError(op, path, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("memmap: %s: %w", op, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("memmap: %s %s: refusing to write through a symbolic link", op, path)
	case !existsOK:
		return nil, fmt.Errorf("memmap: %s %s: %w (pass ExistsOK to overwrite)", op, path, fs.ErrExist)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("memmap: %s %s: not a regular file (%v)", op, path, fi.Mode().Type())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("memmap: %s %s: %w", op, path, err)
	}
	return &newFd{f: tmp, tmp: tmp.Name(), path: path}, nil
}

// anonFile returns an unlinked temporary file of n bytes filled by fill:
// in dir when it seems to have room, else, or when fill finds dir full
// after all, in fallback (shmDir and os.TempDir for anonymous mappings).
func anonFile(dir, fallback string, n int, fill func(*os.File, int) error) (*os.File, error) {
	dirs := []string{fallback}
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil && st.Bavail*uint64(st.Bsize) >= uint64(n) {
		dirs = []string{dir, fallback}
	}
	var err error
	for _, dir := range dirs {
		var fd *os.File
		fd, err = anonFileIn(dir, n, fill)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.ENOSPC) {
			break
		}
	}
	return nil, err
}

// anonFileIn makes an unlinked file of n bytes filled by fill in dir.
func anonFileIn(dir string, n int, fill func(*os.File, int) error) (*os.File, error) {
	fd, err := os.CreateTemp(dir, "tdmpi-memmap-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(fd.Name()); err != nil {
		fd.Close()
		return nil, err
	}
	if err := fill(fd, n); err != nil {
		fd.Close()
		return nil, fmt.Errorf("anonymous mapping of %d bytes in %s: %w", n, dir, err)
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
