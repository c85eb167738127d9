package tensordict

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unicode/utf8"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/memmapdir"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// Memmap returns a locked copy of td whose tensors are memory-mapped files in
// the directory prefix, written in Python tensordict's layout so that
// TensorDict.load_memmap reads it and LoadMemmap reads what Python writes
// (see package memmap for the format):
//
//	prefix/meta.json           batch size, entries in order
//	prefix/<key>.memmap        one file per tensor leaf, raw little-endian
//	prefix/<key>/meta.json     one directory per nested TensorDict, and per
//	                           non-tensor value (NonTensorData)
//
// Keys are file-name encoded (memmapdir.EncodeKey), so any key, "a/b" or ".."
// included, names a file inside its directory. The keys "shape", "device",
// "_type" and "_tdmpi_class" clash with meta.json's own members and are
// refused. A tensorclass name (ClassName) is kept in an extra member that
// Python ignores; Python loads such a node as a plain TensorDict.
//
// Several goroutines write the tensor files (MemmapWorkers). The write is
// crash-safe: tensor files are written and synced first, then each
// meta.json is written under a temporary name, synced and renamed into
// place, children before parents and the root last. A Memmap interrupted at
// any point leaves a directory that either loads as td or does not load.
// A Memmap that fails removes the tensor files it wrote, so a full file
// system (an error wrapping syscall.ENOSPC, never a SIGBUS; see package
// memmap) gets its space back.
//
// Concurrent writers of one directory, in this process or others, take
// turns: each holds an exclusive lock (flock) on every directory it writes
// from before it removes the old meta.json until its last meta.json is in
// place, and LoadMemmap holds a shared one while it loads, so a load sees
// one complete save, never a mix, and the last writer's save is what
// remains. The lock is advisory: Python tensordict and other programs do
// not take it (LoadMemmap then detects a rewrite of the root meta.json
// during its load, see there), and on file systems without directory locks
// (some NFS setups, Lustre without -o flock) nothing is locked. A writer
// waits for the lock as long as another holds it.
//
// A directory that already holds a save is overwritten, as Python's
// default existsok=True does and as SaveConsolidated replaces a file;
// MemmapExclusive refuses it with an error wrapping fs.ErrExist.
//
// An empty prefix maps every leaf anonymously (shared memory, no files, no
// metadata). The result is a new TensorDict; td is unchanged.
func (td *TensorDict) Memmap(prefix string, opts ...MemmapOption) (*TensorDict, error) {
	return td.memmapTo("Memmap", prefix, false, false, memmapOptions(opts))
}

// MemmapInPlace is Memmap that replaces td's own leaves by their
// memory-mapped copies and locks td, like tensordict's memmap_. It returns
// td. Leaves already mapped to their target file are kept as they are.
func (td *TensorDict) MemmapInPlace(prefix string, opts ...MemmapOption) (*TensorDict, error) {
	return td.memmapTo("MemmapInPlace", prefix, true, false, memmapOptions(opts))
}

// MemmapLike is Memmap without copying the tensors' content: every file is
// allocated with the leaf's size and reads as zeros (tensordict's
// memmap_like). Non-tensor values are written as they are.
func (td *TensorDict) MemmapLike(prefix string, opts ...MemmapOption) (*TensorDict, error) {
	return td.memmapTo("MemmapLike", prefix, false, true, memmapOptions(opts))
}

// Flush writes the changes made to td's memory-mapped leaves, nested ones
// included, to their files and waits until they reach the storage device
// (msync, see memmap.Flush): the files of Memmap and LoadMemmap. Each
// file is flushed once, whatever the number of leaves viewing it. Leaves
// that are not memory-mapped, and copy-on-write mappings (CopyOnWrite, and
// LoadConsolidated's, whose changes never reach the file), are skipped. Other
// processes mapping the same files see the changes before Flush; Flush
// makes them durable. An error names the key of the leaf whose file
// failed (a released leaf wraps tensor.ErrReleased).
func (td *TensorDict) Flush() error {
	if td == nil {
		return nilError("Flush")
	}
	done := make(map[*memmap.File]bool)
	return td.walkLeaves(nil, func(k Key, n *TensorDict, j int) error {
		t := n.entries[j].t
		if t.Storage().Released() {
			return fmt.Errorf("tensordict: Flush: key %v: %w", k, tensor.ErrReleased)
		}
		f, ok := memmap.Of(t)
		if !ok || f.Private() || done[f] {
			return nil
		}
		done[f] = true
		if err := memmap.Flush(t); err != nil {
			return fmt.Errorf("tensordict: Flush: key %v: %w", k, err)
		}
		return nil
	})
}

// SavedPath returns the directory td was saved to by Memmap or loaded from by
// LoadMemmap, or "" (also for an anonymous Memmap).
func (td *TensorDict) SavedPath() string { return td.savedPathValue() }

// IsMemmap reports whether td is locked and every tensor leaf, nested ones
// included, is memory-mapped (see package memmap). Unlocking td makes it
// false, as in tensordict. A TensorDict without leaves is memory-mapped when
// it is locked and has a saved path.
func (td *TensorDict) IsMemmap() bool {
	if td == nil || !td.locked {
		return false
	}
	leaves := 0
	ok := td.walkLeaves(nil, func(_ Key, n *TensorDict, j int) error {
		leaves++
		if !memmap.Is(n.entries[j].t) {
			return errNotMapped
		}
		return nil
	}) == nil
	return ok && (leaves > 0 || td.savedPathValue() != "")
}

var errNotMapped = errors.New("not memory-mapped")

// mmNode is one directory of a Memmap in progress.
type mmNode struct {
	src  *TensorDict
	dst  *TensorDict
	dir  string // "" for an anonymous Memmap
	meta memmapdir.TensorDictMeta
	kids []*mmNode
	nts  []mmNonTensor
}

// mmNonTensor is one NonTensorData or NonTensorStack directory to write.
type mmNonTensor struct {
	dir   string
	data  []byte
	stack bool // data is the nested list of a NonTensorStack
}

// mmLeaf is one tensor file to write.
type mmLeaf struct {
	key  Key
	src  *tensor.Tensor
	path string // "" for an anonymous mapping
	node *TensorDict
	idx  int
	out  *tensor.Tensor
}

func (td *TensorDict) memmapTo(op, prefix string, inPlace, like bool, cfg memmapConfig) (*TensorDict, error) {
	if td == nil {
		return nil, nilError(op)
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("tensordict: %s: %w", op, cfg.err)
	}
	if prefix != "" {
		abs, err := filepath.Abs(prefix)
		if err != nil {
			return nil, fmt.Errorf("tensordict: %s: %w", op, err)
		}
		prefix = abs
	}
	var leaves []*mmLeaf
	root, err := planMemmap(op, td, nil, prefix, inPlace, &leaves, 0)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		var locks []*memmapdir.DirLock
		defer func() {
			for _, l := range locks {
				l.Unlock()
			}
		}()
		if err := prepareDirs(op, root, cfg.existsOK, true, &locks); err != nil {
			return nil, err
		}
	}
	if err := writeLeaves(op, leaves, like, cfg); err != nil {
		return nil, err
	}
	for _, l := range leaves {
		l.node.entries[l.idx].t = l.out
		l.node.edited() // in place, the node's leaves are new tensors
	}
	if prefix != "" {
		if err := writeMetas(op, root, cfg); err != nil {
			discardLeaves(leaves)
			for _, l := range leaves {
				l.node.entries[l.idx].t = l.src
				l.node.edited()
			}
			return nil, err
		}
	}
	root.dst.Lock()
	setSavedPaths(root)
	return root.dst, nil
}

// maxMemmapDepth bounds the nesting Memmap and LoadMemmap follow.
const maxMemmapDepth = 1000

// planMemmap builds the directory tree for td and the list of leaves to
// write, and the destination TensorDicts (td itself in place).
func planMemmap(op string, td *TensorDict, key Key, dir string, inPlace bool, leaves *[]*mmLeaf, depth int) (*mmNode, error) {
	if depth > maxMemmapDepth {
		return nil, fmt.Errorf("tensordict: %s: key %v: nested deeper than %d levels", op, key, maxMemmapDepth)
	}
	n := &mmNode{src: td, dir: dir}
	n.meta = memmapdir.TensorDictMeta{BatchSize: td.BatchSize(), Device: "cpu", Class: td.class}
	if inPlace {
		n.dst = td
	} else {
		n.dst = newTD(td.batch)
		n.dst.class = td.class
	}
	for i := range td.entries {
		e := &td.entries[i]
		k := key.child(e.name)
		if dir != "" {
			if memmapdir.IsReservedKey(e.name) {
				return nil, fmt.Errorf("tensordict: %s: key %v: %q is a member of meta.json and cannot name an entry", op, k, e.name)
			}
			if !utf8.ValidString(e.name) {
				return nil, fmt.Errorf("tensordict: %s: key %v: not valid UTF-8, cannot be written to meta.json", op, k)
			}
		}
		sub := ""
		switch e.kind {
		case kindTensor:
			if e.t.Storage().Released() {
				return nil, fmt.Errorf("tensordict: %s: key %v: %w", op, k, tensor.ErrReleased)
			}
			if dir != "" {
				sub = memmapdir.KeyPath(dir, e.name, ".memmap")
				n.meta.Entries = append(n.meta.Entries, memmapdir.Entry{Key: e.name,
					Leaf: &memmapdir.Leaf{Device: "cpu", Shape: e.t.Shape(), DType: e.t.DType()}})
			}
			j := i
			if !inPlace {
				j = len(n.dst.entries)
				n.dst.add(e.name, entry{kind: kindTensor, t: e.t})
			}
			*leaves = append(*leaves, &mmLeaf{key: k, src: e.t, path: sub, node: n.dst, idx: j})
		case kindTD:
			if dir != "" {
				sub = memmapdir.KeyPath(dir, e.name, "")
				n.meta.Entries = append(n.meta.Entries, memmapdir.Entry{Key: e.name, Kind: memmapdir.KindTensorDict})
			}
			kid, err := planMemmap(op, e.td, k, sub, inPlace, leaves, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
			if !inPlace {
				n.dst.add(e.name, entry{kind: kindTD, td: kid.dst})
			}
		case kindNonTensor:
			if dir != "" {
				v, kind := e.v, memmapdir.KindNonTensorData
				st, stack := v.(*NonTensorStack)
				if stack {
					v, kind = st.ToList(), memmapdir.KindNonTensorStack
				}
				data, err := memmapdir.MarshalPython(v)
				if err != nil {
					return nil, fmt.Errorf("tensordict: %s: key %v: %w", op, k, err)
				}
				n.meta.Entries = append(n.meta.Entries, memmapdir.Entry{Key: e.name, Kind: kind})
				n.nts = append(n.nts, mmNonTensor{dir: memmapdir.KeyPath(dir, e.name, ""), data: data, stack: stack})
			}
			if !inPlace {
				n.dst.add(e.name, entry{kind: kindNonTensor, v: e.v})
			}
		}
	}
	return n, nil
}

// prepareDirs creates the node directories, refusing symbolic links and
// non-directories, locks each node directory exclusively (appending the
// locks to locks, parents before children, the order every writer takes
// them in), and checks for (or, with existsOK, removes) the meta.json
// files of an earlier save, top-down, before any data is written.
func prepareDirs(op string, n *mmNode, existsOK, root bool, locks *[]*memmapdir.DirLock) error {
	dirs := []string{n.dir}
	for _, nt := range n.nts {
		dirs = append(dirs, nt.dir)
	}
	for i, d := range dirs {
		if err := makeDir(op, d, root && i == 0); err != nil {
			return err
		}
		if i == 0 {
			l, err := memmapdir.LockDir(d, true)
			if err != nil {
				return fmt.Errorf("tensordict: %s: %w", op, err)
			}
			*locks = append(*locks, l)
		}
		meta := filepath.Join(d, memmapdir.MetaFile)
		if _, err := os.Lstat(meta); err == nil {
			if !existsOK {
				return fmt.Errorf("tensordict: %s: %s: %w (MemmapExclusive refuses to overwrite a saved TensorDict)", op, meta, fs.ErrExist)
			}
			if err := os.Remove(meta); err != nil {
				return fmt.Errorf("tensordict: %s: %w", op, err)
			}
			if err := memmapdir.SyncDir(d); err != nil {
				return fmt.Errorf("tensordict: %s: %w", op, err)
			}
		}
	}
	for _, k := range n.kids {
		if err := prepareDirs(op, k, existsOK, false, locks); err != nil {
			return err
		}
	}
	return nil
}

// makeDir creates dir (and its parents) if needed. Only the root directory,
// which the caller names, may be a symbolic link.
func makeDir(op, dir string, root bool) error {
	fi, err := os.Lstat(dir)
	if err == nil && root && fi.Mode()&fs.ModeSymlink != 0 {
		fi, err = os.Stat(dir)
	}
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("tensordict: %s: refusing to write through symbolic link %s", op, dir)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("tensordict: %s: %s exists and is not a directory", op, dir)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("tensordict: %s: %w", op, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tensordict: %s: %w", op, err)
	}
	return nil
}

// writeLeaves writes every leaf's file with cfg.workers goroutines, and
// syncs it. On error the mappings made so far are closed.
func writeLeaves(op string, leaves []*mmLeaf, like bool, cfg memmapConfig) error {
	var mopts []memmap.Option
	if cfg.existsOK {
		mopts = append(mopts, memmap.ExistsOK())
	}
	jobs := make(chan *mmLeaf)
	errs := make([]error, len(leaves))
	index := make(map[*mmLeaf]int, len(leaves))
	for i, l := range leaves {
		index[l] = i
	}
	var wg sync.WaitGroup
	for w := 0; w < min(cfg.workers, len(leaves)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range jobs {
				errs[index[l]] = mem.CatchFault(func() error { return writeLeaf(l, like, cfg.noSync, mopts) })
			}
		}()
	}
	for _, l := range leaves {
		jobs <- l
	}
	close(jobs)
	wg.Wait()
	var all []error
	for i, err := range errs {
		if err != nil {
			all = append(all, fmt.Errorf("tensordict: %s: key %v: %w", op, leaves[i].key, err))
		}
	}
	if len(all) == 0 {
		return nil
	}
	discardLeaves(leaves)
	return errors.Join(all...)
}

// discardLeaves undoes the leaves a failed Memmap wrote: it closes their
// mappings and removes their files, so that a save that failed (a full
// disk, say) gives its space back. Leaves that were already mapped to their
// target file (MemmapInPlace) are kept.
func discardLeaves(leaves []*mmLeaf) {
	for _, l := range leaves {
		if l.out == nil || l.out == l.src {
			continue
		}
		_ = memmap.Close(l.out)
		if l.path != "" && l.out.Numel() > 0 {
			_ = os.Remove(l.path)
		}
	}
}

// writeLeaf writes and syncs one tensor file.
func writeLeaf(l *mmLeaf, like, noSync bool, opts []memmap.Option) error {
	var (
		out *tensor.Tensor
		err error
	)
	if like {
		out, err = memmap.Empty(l.src.DType(), l.path, l.src.Shape(), opts...)
	} else {
		out, err = memmap.FromTensor(l.src, l.path, opts...)
	}
	if err != nil {
		return err
	}
	l.out = out
	if !noSync && l.path != "" && out.Numel() > 0 {
		return memmap.Flush(out)
	}
	return nil
}

// writeMetas writes the meta.json files of n's subtree, children first.
func writeMetas(op string, n *mmNode, cfg memmapConfig) error {
	for _, k := range n.kids {
		if err := writeMetas(op, k, cfg); err != nil {
			return err
		}
	}
	for _, nt := range n.nts {
		var text []byte
		var err error
		if nt.stack {
			// Python writes a stack's values as the nested list of its
			// elements in batch order, with stack_dim 0 (its loader
			// stacks along dimension 0 whatever stack_dim says).
			text, err = (&memmapdir.NonTensorStackMeta{Data: nt.data}).Marshal()
		} else {
			text, err = (&memmapdir.NonTensorMeta{Data: nt.data}).Marshal()
		}
		if err != nil {
			return fmt.Errorf("tensordict: %s: %w", op, err)
		}
		if err := writeMetaFile(filepath.Join(nt.dir, memmapdir.MetaFile), text, cfg.noSync); err != nil {
			return fmt.Errorf("tensordict: %s: %w", op, err)
		}
	}
	text, err := n.meta.Marshal()
	if err != nil {
		return fmt.Errorf("tensordict: %s: %s: %w", op, n.dir, err)
	}
	if err := writeMetaFile(filepath.Join(n.dir, memmapdir.MetaFile), text, cfg.noSync); err != nil {
		return fmt.Errorf("tensordict: %s: %w", op, err)
	}
	return nil
}

// writeMetaFile writes a meta.json crash-safely (memmapdir.WriteMeta), without
// the syncs under MemmapNoSync.
func writeMetaFile(path string, text []byte, noSync bool) error {
	if noSync {
		return memmapdir.WriteMetaNoSync(path, text)
	}
	return memmapdir.WriteMeta(path, text)
}

// setSavedPaths records each node's directory on its TensorDict.
func setSavedPaths(n *mmNode) {
	n.dst.setSavedPath(n.dir)
	for _, k := range n.kids {
		setSavedPaths(k)
	}
}

// MemmapOption configures Memmap, MemmapInPlace and MemmapLike.
type MemmapOption func(*memmapConfig)

type memmapConfig struct {
	existsOK bool
	workers  int
	noSync   bool
	err      error // an invalid option
}

// MemmapExistsOK lets Memmap write into a directory that already holds a
// saved TensorDict, overwriting its files (tensordict's existsok=True). It
// is the default, as in Python tensordict and as SaveConsolidated replaces
// an existing file; the option undoes an earlier MemmapExclusive. Before
// anything is overwritten, the old meta.json files are removed, so an
// interrupted overwrite never loads as a mix of old and new; tensors still
// mapping the old files keep their content (the new files are renamed over
// them).
func MemmapExistsOK() MemmapOption { return func(c *memmapConfig) { c.existsOK = true } }

// MemmapExclusive makes Memmap refuse a directory that already holds a
// saved TensorDict (a meta.json) or a tensor file it would write, with an
// error wrapping fs.ErrExist, before anything is written (tensordict's
// existsok=False).
func MemmapExclusive() MemmapOption { return func(c *memmapConfig) { c.existsOK = false } }

// MemmapWorkers sets how many goroutines write tensor files at once. The
// default is twice GOMAXPROCS, at most 16. An n below 1 makes Memmap
// return an error.
func MemmapWorkers(n int) MemmapOption {
	return func(c *memmapConfig) {
		if n < 1 {
			c.err = errors.Join(c.err, fmt.Errorf("MemmapWorkers(%d): at least 1 worker is needed", n))
			return
		}
		c.workers = n
	}
}

// MemmapNoSync skips the fsync of tensor files and meta.json files. The
// write order still guarantees that a process killed mid-way leaves a
// directory that does not load as a wrong TensorDict, but after a power
// failure or kernel crash the directory may hold anything. Use it for
// scratch data.
func MemmapNoSync() MemmapOption { return func(c *memmapConfig) { c.noSync = true } }

func memmapOptions(opts []MemmapOption) memmapConfig {
	c := memmapConfig{existsOK: true, workers: min(2*runtime.GOMAXPROCS(0), 16)}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// LoadOption configures LoadMemmap.
type LoadOption func(*loadConfig)

type loadConfig struct {
	subPath  []string
	private  bool
	inMemory bool
}

// SubPath makes LoadMemmap load the nested TensorDict named by the key parts
// instead of the root, like tensordict's subpath argument: LoadMemmap(p,
// SubPath("a", "b")) loads the directory p/a/b, each part file-name encoded.
func SubPath(parts ...string) LoadOption {
	return func(c *loadConfig) { c.subPath = append([]string(nil), parts...) }
}

// InMemory makes LoadMemmap read every tensor file into memory
// (memmap.ReadFile) instead of mapping it: loading costs a read of every
// byte and memory for all of them, and in exchange the result no longer
// depends on the files. Another process truncating or rewriting them
// afterwards cannot make any access fault, MPI transfers included (see
// Memmap for what a truncated mapping does). The result is locked, but not
// memory-mapped (IsMemmap is false), and writes to it never reach the
// files.
func InMemory() LoadOption { return func(c *loadConfig) { c.inMemory = true } }

// CopyOnWrite makes LoadMemmap map every tensor file copy-on-write: the
// loaded tensors can be modified, but the changes never reach the files.
// Without it, files this process may write are mapped shared.
func CopyOnWrite() LoadOption { return func(c *loadConfig) { c.private = true } }
