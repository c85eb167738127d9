package tensordict

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/internal/memmapdir"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// LoadMemmap loads the TensorDict saved in the directory prefix by Memmap or
// by Python tensordict's memmap / save (tensordict 0.6 and later, robust or
// legacy file names). Tensor leaves are memory-mapped, not read: loading
// costs a few system calls per leaf, whatever the data's size. Files this
// process may write are mapped shared (see CopyOnWrite). The result is
// locked, and its SavedPath is prefix.
//
// A directory written by someone else is not trusted. Keys are looked up
// through their encoded file names only, so no key reaches outside its
// directory; symbolic links, tensor files with more than one hard link
// (which could name a file of the user's elsewhere: refused with an error
// wrapping memmap.ErrHardLink unless CopyOnWrite is given, since a shared
// mapping would write into it), files shorter than their tensor, shapes that
// overflow, unknown dtypes, missing files, meta.json files larger than
// memmapdir.MaxMetaSize and malformed JSON are errors that name the file.
// Python-only content is refused with an error too: pickled non-tensor data,
// nested (jagged) tensors, lazy stacks and tensorclasses.
//
// SubPath loads a nested TensorDict alone; loading its directory directly
// does the same. An empty prefix is an error (Memmap("") saves nothing).
//
// A file that another process truncates after it was mapped loses the
// pages past its new end, and the kernel answers an access to them with
// SIGBUS, which ends a Go program. The library's own accesses are guarded
// (debug.SetPanicOnFault, see memmap.Guard) and return an error wrapping
// memmap.ErrFault (or syscall.EFAULT where a write(2) reads the pages):
// every TensorDict method that returns an error and reads or writes the
// leaves (Consolidate, SaveConsolidated, Memmap, Set, SetInPlace, SetAt,
// Update, Apply, the algebra: Sum, Add, AddInPlace, Fill, Cat, Stack, ...).
// The TensorDict operations that return no error (Clone, Contiguous, To,
// EqScalar, All, Any and the scalar algebra) panic instead, with an error
// wrapping memmap.ErrFault that names the operation; memmap.Guard around
// the call returns it. String prints such a leaf's values as <fault>. MPI reads and writes a transfer's memory in
// C, where no fault can be caught, so Send, ISend, InitRemote, Recv,
// IRecv, AllReduce, Reduce and Broadcast first check every mapped buffer
// they hand to MPI (one byte of its last page, which is the first page a
// shrinking file loses) and return an error wrapping memmap.ErrFault before
// MPI touches it (a receive drains the sender's messages, as any receive
// it refuses; a collective fails on every rank). What remains: a file
// truncated between that check and MPI's access (the window of one
// transfer) still ends the process, as do the tensor package's own
// operations on a leaf and the caller's reads outside memmap.Guard. InMemory reads the files at load
// instead, for directories that others may truncate.
//
// Each load's leaves are its own tensors, released by its Release; shared
// mappings of the same files are reused between loads (see
// memmap.FromFile), so loading a directory again and again without
// Release keeps one mapping per file, not one per file per load. Loads of
// different directories keep their mappings until Release, even once the
// TensorDict is unreachable (see package memmap for why): release each
// when done.
//
// LoadMemmap holds a shared lock on the directory it loads while it loads
// (see Memmap), so a Memmap of this package into it, from any process,
// waits, and the result is one complete save. Files that a later save
// replaces stay mapped with their old content. A writer that takes no lock
// is detected when it replaces or removes the root meta.json during the
// load (which a rewrite does first, and an interrupted one leaves absent):
// LoadMemmap then loads again, up to 3 times, and returns an error
// wrapping ErrRewritten if the directory never stays still.
func LoadMemmap(prefix string, opts ...LoadOption) (*TensorDict, error) {
	if prefix == "" {
		return nil, errors.New(`tensordict: LoadMemmap: empty prefix (Memmap("") maps anonymously and saves nothing to load; name the directory, "." for the working one)`)
	}
	var cfg loadConfig
	for _, o := range opts {
		o(&cfg)
	}
	dir, err := filepath.Abs(prefix)
	if err != nil {
		return nil, fmt.Errorf("tensordict: LoadMemmap: %w", err)
	}
	for _, part := range cfg.subPath {
		next, err := childDir(dir, part)
		if err != nil {
			return nil, fmt.Errorf("tensordict: LoadMemmap: subpath %v: %w", Key(cfg.subPath), err)
		}
		dir = next
	}
	var mopts []memmap.Option
	if cfg.private {
		mopts = append(mopts, memmap.Private())
	}
	lock, err := memmapdir.LockDir(dir, false)
	if err != nil {
		return nil, fmt.Errorf("tensordict: LoadMemmap: %w", err)
	}
	defer lock.Unlock()
	td, err := loadUnchanged(dir, func() (*TensorDict, []*tensor.Tensor, error) {
		l := &loader{opts: mopts, inMemory: cfg.inMemory}
		td, err := l.loadTD(dir, nil, 0)
		return td, l.mapped, err
	})
	if err != nil {
		return nil, fmt.Errorf("tensordict: LoadMemmap: %w", err)
	}
	td.Lock()
	return td, nil
}

// loadAttempts is how many times LoadMemmap loads a directory that keeps
// changing under it before it gives up.
const loadAttempts = 3

// loadUnchanged calls load, which loads the TensorDict in dir and returns
// it with the mappings it made, until dir's meta.json stays the same file
// during a call (not replaced, removed or modified), and returns that
// call's result. The mappings of a call that failed or saw meta.json
// change are closed. After loadAttempts calls that saw it change, it
// returns an error wrapping ErrRewritten.
func loadUnchanged(dir string, load func() (*TensorDict, []*tensor.Tensor, error)) (*TensorDict, error) {
	meta := filepath.Join(dir, memmapdir.MetaFile)
	for attempt := 1; ; attempt++ {
		before, berr := os.Lstat(meta)
		td, mapped, err := load()
		after, aerr := os.Lstat(meta)
		changed := (berr == nil) != (aerr == nil) || (berr == nil && !sameFile(before, after))
		if err != nil || changed {
			for _, t := range mapped {
				_ = memmap.Close(t)
			}
		}
		if !changed {
			return td, err
		}
		if attempt == loadAttempts {
			return nil, fmt.Errorf("%s: %w (%d attempts)", dir, ErrRewritten, loadAttempts)
		}
	}
}

// sameFile reports whether a and b describe the same, unmodified file:
// same inode, size and modification time (a replacement written later has
// a later one, even where the file system reuses the inode number).
func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// loader holds the state of one load of LoadMemmap (one attempt).
type loader struct {
	opts     []memmap.Option
	inMemory bool             // read the files instead of mapping them (InMemory)
	mapped   []*tensor.Tensor // to close on failure
}

// childDir returns the directory of the nested collection key in dir: its
// encoded name, or its legacy raw name when only that exists and is safe.
// The directory must hold a meta.json and must not be a symbolic link.
func childDir(dir, key string) (string, error) {
	p := memmapdir.KeyPath(dir, key, "")
	if _, err := os.Lstat(filepath.Join(p, memmapdir.MetaFile)); err != nil {
		if legacy, ok := memmapdir.LegacyName(key); ok {
			lp := filepath.Join(dir, legacy)
			if _, err := os.Lstat(filepath.Join(lp, memmapdir.MetaFile)); err == nil {
				p = lp
			}
		}
	}
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("entry %q: directory %s is missing", key, p)
	case err != nil:
		return "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", fmt.Errorf("entry %q: %s is a symbolic link", key, p)
	case !fi.IsDir():
		return "", fmt.Errorf("entry %q: %s is not a directory", key, p)
	}
	return p, nil
}

// leafFile returns the file of the tensor leaf key in dir, encoded or
// legacy; ok is false when neither exists.
func leafFile(dir, key string) (path string, ok bool, err error) {
	p := memmapdir.KeyPath(dir, key, ".memmap")
	_, err = os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		if legacy, safe := memmapdir.LegacyName(key); safe {
			lp := filepath.Join(dir, legacy+".memmap")
			if _, lerr := os.Lstat(lp); lerr == nil {
				return lp, true, nil
			}
		}
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	return p, true, nil
}

// loadTD loads the TensorDict node in dir. batch is the parent's batch size
// (nil at the top), which the node's must start with.
func (l *loader) loadTD(dir string, parentBatch []int, depth int) (*TensorDict, error) {
	if depth > maxMemmapDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d levels", dir, maxMemmapDepth)
	}
	m, err := memmapdir.ReadMeta(filepath.Join(dir, memmapdir.MetaFile))
	if err != nil {
		return nil, err
	}
	if m.Type != memmapdir.TypeTensorDict {
		return nil, fmt.Errorf("%s: _type %q is not a TensorDict%s", m.Path, m.Type, unsupportedHint(m.Type))
	}
	tm, err := m.TensorDict()
	if err != nil {
		return nil, err
	}
	if !hasPrefix(tm.BatchSize, parentBatch) {
		return nil, fmt.Errorf("%s: batch size %v does not start with the parent's %v", m.Path, tm.BatchSize, parentBatch)
	}
	td := newTD(tm.BatchSize)
	td.class = tm.Class
	td.setSavedPath(dir)
	for _, e := range tm.Entries {
		if _, dup := td.lookup(e.Key); dup {
			return nil, fmt.Errorf("%s: duplicate entry %q", m.Path, e.Key)
		}
		if e.Leaf != nil {
			t, err := l.loadLeaf(dir, m.Path, e.Key, e.Leaf, tm.BatchSize)
			if err != nil {
				return nil, err
			}
			td.add(e.Key, entry{kind: kindTensor, t: t})
			continue
		}
		sub, err := childDir(dir, e.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Path, err)
		}
		if err := l.loadChild(td, sub, e.Key, depth); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// loadLeaf maps the tensor leaf key of the node dir described by leaf.
func (l *loader) loadLeaf(dir, metaPath, key string, leaf *memmapdir.Leaf, batch []int) (*tensor.Tensor, error) {
	if leaf.IsNested {
		return nil, fmt.Errorf("%s: entry %q is a nested (jagged) tensor, which tdmpi does not support", metaPath, key)
	}
	if !hasPrefix(leaf.Shape, batch) {
		return nil, fmt.Errorf("%s: entry %q: shape %v does not start with batch size %v", metaPath, key, leaf.Shape, batch)
	}
	path, ok, err := leafFile(dir, key)
	if err != nil {
		return nil, fmt.Errorf("%s: entry %q: %w", metaPath, key, err)
	}
	n, _ := tensor.Numel(leaf.Shape) // checked by memmap
	if !ok && n > 0 {
		return nil, fmt.Errorf("%s: entry %q: tensor file %s is missing", metaPath, key, path)
	}
	if l.inMemory {
		t, err := memmap.ReadFile(path, leaf.DType, leaf.Shape)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %q: %w", metaPath, key, err)
		}
		return t, nil
	}
	t, err := memmap.FromFile(path, leaf.DType, leaf.Shape, l.opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: entry %q: %w", metaPath, key, err)
	}
	l.mapped = append(l.mapped, t)
	return t, nil
}

// loadChild loads the collection in directory sub as entry key of td.
func (l *loader) loadChild(td *TensorDict, sub, key string, depth int) error {
	m, err := memmapdir.ReadMeta(filepath.Join(sub, memmapdir.MetaFile))
	if err != nil {
		return err
	}
	switch m.Type {
	case memmapdir.TypeTensorDict:
		child, err := l.loadTD(sub, td.batch, depth+1)
		if err != nil {
			return err
		}
		td.add(key, entry{kind: kindTD, td: child})
	case memmapdir.TypeNonTensorData:
		nt, err := m.NonTensor()
		if err != nil {
			return err
		}
		if nt.Data == nil {
			if _, err := os.Lstat(filepath.Join(sub, "other.pickle")); err == nil {
				return fmt.Errorf("%s: the data of entry %q is pickled (other.pickle); tdmpi does not read pickle", m.Path, key)
			}
			return fmt.Errorf("%s: entry %q has no \"data\" member", m.Path, key)
		}
		v, err := memmapdir.DecodeData(nt.Data)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		cv, err := canonical(v, 0)
		if err != nil {
			return fmt.Errorf("%s: entry %q: %w", m.Path, key, err)
		}
		td.add(key, entry{kind: kindNonTensor, v: cv})
	case memmapdir.TypeNonTensorStack:
		v, err := loadStack(m, key, td.batch)
		if err != nil {
			return err
		}
		td.add(key, entry{kind: kindNonTensor, v: v})
	default:
		return fmt.Errorf("%s: entry %q has _type %q%s", m.Path, key, m.Type, unsupportedHint(m.Type))
	}
	return nil
}

// loadStack reads the NonTensorStack meta.json m of entry key, held at
// batch size batch. Python writes the values as the nested list of the
// stack's elements in batch order (its tolist), whatever stack_dim says; the
// list is read one level per batch dimension, so that values that are
// themselves lists stay values (Python's loader instead nests as deep as
// the lists are regular).
func loadStack(m *memmapdir.Meta, key string, batch []int) (any, error) {
	sm, err := m.NonTensorStack()
	if err != nil {
		return nil, err
	}
	if sm.Data == nil {
		return nil, fmt.Errorf("%s: entry %q has no \"data\" member", m.Path, key)
	}
	if len(sm.Data) > 0 && sm.Data[0] == '"' {
		return nil, fmt.Errorf("%s: the data of entry %q is pickled (%s); tdmpi does not read pickle", m.Path, key, sm.Data)
	}
	if len(batch) == 0 {
		return nil, fmt.Errorf("%s: entry %q is a NonTensorStack under batch size []", m.Path, key)
	}
	n, err := stackLen(batch)
	if err != nil {
		return nil, fmt.Errorf("%s: entry %q: %w", m.Path, key, err)
	}
	v, err := memmapdir.DecodeData(sm.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	flat := make([]any, 0, n)
	if flat, err = flattenStack(flat, v, batch, 0); err != nil {
		return nil, fmt.Errorf("%s: entry %q: %w", m.Path, key, err)
	}
	for i, e := range flat {
		if flat[i], err = canonical(e, 1); err != nil {
			return nil, fmt.Errorf("%s: entry %q: value %d: %w", m.Path, key, i, err)
		}
	}
	return fromElements(flat, batch, nil), nil
}

// flattenStack appends the values of v, a nested list of shape batch[d:],
// to flat in row-major order.
func flattenStack(flat []any, v any, batch []int, d int) ([]any, error) {
	if d == len(batch) {
		return append(flat, v), nil
	}
	l, ok := v.([]any)
	if !ok || len(l) != batch[d] {
		return nil, fmt.Errorf("data is not a nested list of shape %v (the batch size): dimension %d has %s", batch, d, describeLen(v))
	}
	var err error
	for _, e := range l {
		if flat, err = flattenStack(flat, e, batch, d+1); err != nil {
			return nil, err
		}
	}
	return flat, nil
}

// describeLen says how long a list v is, or that it is not one.
func describeLen(v any) string {
	if l, ok := v.([]any); ok {
		return fmt.Sprintf("%d elements", len(l))
	}
	return fmt.Sprintf("a %T, not a list", v)
}

// unsupportedHint explains the Python classes LoadMemmap cannot load.
func unsupportedHint(typ string) string {
	switch typ {
	case memmapdir.TypeLazyStacked:
		return ", a lazy stack, which tdmpi does not load"
	case "":
		return ", no class"
	}
	return ", which tdmpi does not load (tensorclasses are not supported)"
}
