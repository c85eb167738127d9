package memmap

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/tensor"
)

// File is the memory mapping behind a memory-mapped tensor. It is the owner
// of the tensor's Storage (see tensor.Storage.Owner); the package-level
// functions Filename, Flush, Close and Is reach it from the tensor.
//
// A File maps exactly the bytes its tensor needs: a file longer than that is
// accepted and its tail is left alone.
type File struct {
	mu      sync.Mutex
	path    string // absolute path; "" for an anonymous mapping
	data    []byte // the mapping; nil for a zero-byte tensor or once closed
	private bool   // copy-on-write (MAP_PRIVATE): changes never reach the file
	closed  bool
	shared  *sharedMap // FromFile's shared mapping, which other Files may use too
}

// Name returns the absolute path of the mapped file, or "" for an anonymous
// mapping.
func (f *File) Name() string { return f.path }

// Anonymous reports whether f is backed by an unlinked temporary file rather
// than a named one.
func (f *File) Anonymous() bool { return f.path == "" }

// Private reports whether f is a copy-on-write mapping, whose changes are
// never written back to the file.
func (f *File) Private() bool { return f.private }

// Len returns the number of mapped bytes (0 once closed).
func (f *File) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.data)
}

// flush writes the mapped bytes back to the file and waits for the write to
// reach the device (msync MS_SYNC).
func (f *File) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return fmt.Errorf("memmap: Flush %s: mapping was closed", f.describe())
	case f.private:
		return fmt.Errorf("memmap: Flush %s: mapped copy-on-write; changes are never written to the file", f.describe())
	case len(f.data) == 0:
		return nil
	}
	if err := unix.Msync(f.data, unix.MS_SYNC); err != nil {
		return fmt.Errorf("memmap: Flush %s: msync: %w", f.describe(), err)
	}
	return nil
}

// unmap releases the mapping. It is the release function of the tensor's
// storage, which calls it at most once.
func (f *File) unmap() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	data := f.data
	f.data = nil
	if f.shared != nil && !f.shared.drop() {
		return nil // another File still uses the mapping
	}
	if len(data) == 0 {
		return nil
	}
	if err := unix.Munmap(data); err != nil {
		return fmt.Errorf("memmap: Close %s: munmap: %w", f.describe(), err)
	}
	return nil
}

// describe names f in messages.
func (f *File) describe() string {
	if f.path == "" {
		return "anonymous mapping"
	}
	return f.path
}

// newTensor wraps the mapping of f in an external storage and returns the
// contiguous tensor of dtype dt and shape that views it.
func (f *File) newTensor(dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	b := f.data
	if b == nil {
		b = []byte{}
	}
	st := tensor.NewExternalStorage(b, f, f.unmap)
	t, err := tensor.FromStorage(dt, st, 0, shape...)
	if err != nil {
		_ = st.Release()
		return nil, err
	}
	return t, nil
}

// Guard runs f and returns its error, or an error wrapping ErrFault if f
// touched a page of a mapping that is no longer backed (debug.SetPanicOnFault
// on for f). Use it around your own reads and writes of memory-mapped
// tensors whose files other processes may truncate; without it such an
// access ends the process with SIGBUS. It covers Go code on the calling
// goroutine only: a goroutine f starts must call Guard itself, and memory
// read by C code (an MPI transfer) is not covered.
func Guard(f func() error) error { return mem.CatchFault(f) }

// errNotMemmap is returned by the functions that need a memory-mapped tensor.
var errNotMemmap = errors.New("tensor is not memory-mapped")

// Of returns the File behind t, and false if t is not memory-mapped by this
// package.
func Of(t *tensor.Tensor) (*File, bool) {
	if t == nil || t.Storage() == nil {
		return nil, false
	}
	f, ok := t.Storage().Owner().(*File)
	return f, ok
}

// Is reports whether t is a tensor memory-mapped by this package (a view of
// one included).
func Is(t *tensor.Tensor) bool {
	_, ok := Of(t)
	return ok
}

// Filename returns the absolute path of the file behind t. It returns an error
// if t is not memory-mapped or is backed by an anonymous mapping.
func Filename(t *tensor.Tensor) (string, error) {
	f, ok := Of(t)
	if !ok {
		return "", fmt.Errorf("memmap: Filename: %w", errNotMemmap)
	}
	if f.path == "" {
		return "", errors.New("memmap: Filename: tensor has an anonymous mapping, no file")
	}
	return f.path, nil
}

// Flush writes the changes made through t's mapping to its file and waits
// until they reach the storage device (msync with MS_SYNC). Other processes
// that map the same file with MAP_SHARED see the changes even before Flush;
// Flush is what makes them durable. It returns an error if t is not
// memory-mapped, was closed, or is a copy-on-write mapping.
func Flush(t *tensor.Tensor) error {
	f, ok := Of(t)
	if !ok {
		return fmt.Errorf("memmap: Flush: %w", errNotMemmap)
	}
	return f.flush()
}

// Close unmaps the memory behind t by releasing t's storage (a shared
// mapping that FromFile reuses for several tensors of one file is unmapped
// when the last of them is closed). It is idempotent. Afterwards t and every view sharing its storage are unusable:
// tensor operations on them return "storage was released" errors. Slices
// obtained earlier from t (Bytes, Data) must not be used after Close. A
// mapping that a transfer of tdmpi still hands to MPI (an ISend not yet
// waited for, a receive given up at its deadline that MPI has not
// completed) is unmapped only when that transfer ends: Close returns nil
// at once and never unmaps memory under MPI (see tensor.Storage.Release).
func Close(t *tensor.Tensor) error {
	if _, ok := Of(t); !ok {
		return fmt.Errorf("memmap: Close: %w", errNotMemmap)
	}
	return t.Storage().Release()
}
