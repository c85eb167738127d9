package tensordict

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/tensorx"
	"github.com/tdmpi/tdmpi/tensor"
)

// SaveConsolidated writes td to filename in Python tensordict's consolidated
// single-file format, the one consolidate(filename=...) writes and
// TensorDict.from_consolidated(filename) reads: the consolidated storage
// (see Consolidate), then the metadata JSON (see ConsolidatedMetadata), then
// the JSON's length as a little-endian int64. Leaves are streamed to the file
// without building the storage in memory. A TensorDict with a class name also
// gets a top-level "_tensorclass_type" member, which Python's reader does not
// expect; plain TensorDicts stay readable by Python.
//
// The file is written under a temporary name in the same folder and renamed
// into place, so readers never see a partial file. An existing file is
// replaced, as Memmap overwrites an existing save by default.
func (td *TensorDict) SaveConsolidated(filename string) (err error) {
	var (
		meta  []byte
		write func(w *bufio.Writer) error
	)
	if td.IsConsolidated() {
		if meta, err = td.ConsolidatedMetadata(); err != nil {
			return err
		}
		st := td.cons.st
		write = func(w *bufio.Writer) error {
			_, err := w.Write(st.Bytes())
			return err
		}
	} else {
		p, err := makePlan("SaveConsolidated", td, 0, false)
		if err != nil {
			return err
		}
		if meta, err = encodeMetadata(p); err != nil {
			return err
		}
		write = func(w *bufio.Writer) error { return streamLeaves(w, p) }
	}
	if td.class != "" {
		meta = codec.AppendClass(meta, td.class)
	}

	f, err := os.CreateTemp(filepath.Dir(filename), "."+filepath.Base(filename)+".tmp*")
	if err != nil {
		return fmt.Errorf("tensordict: SaveConsolidated: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("tensordict: SaveConsolidated %s: %w", filename, err)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err = mem.CatchFault(func() error { return write(w) }); err != nil {
		return err
	}
	if _, err = w.Write(meta); err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(meta)))
	if _, err = w.Write(n[:]); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filename)
}

// streamLeaves writes the storage of plan p to w.
func streamLeaves(w *bufio.Writer, p *plan) error {
	var zeros [16]byte
	for _, l := range p.flatten() {
		t := l.t.Contiguous()
		b, err := t.Bytes()
		if err != nil {
			return fmt.Errorf("leaf %q: %w", l.name, err)
		}
		if _, err := w.Write(zeros[:l.gap]); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if _, err := w.Write(zeros[:l.pad]); err != nil {
			return err
		}
	}
	return nil
}

// splitConsolidated splits the bytes of a consolidated file into the storage
// length and the metadata JSON, checking the trailer.
func splitConsolidated(data []byte, cfg readConfig) (stLen int, meta []byte, err error) {
	if len(data) < 8 {
		return 0, nil, fmt.Errorf("file is %d bytes, too short for the 8-byte length trailer", len(data))
	}
	end := len(data) - 8
	n := binary.LittleEndian.Uint64(data[end:])
	if n > uint64(end) {
		return 0, nil, fmt.Errorf("metadata length %d exceeds the %d bytes before the trailer", n, end)
	}
	if n > uint64(cfg.MaxMetadataBytes) {
		return 0, nil, fmt.Errorf("metadata is %d bytes, limit %d: %w", n, cfg.MaxMetadataBytes, ErrLimit)
	}
	stLen = end - int(n)
	return stLen, data[stLen:end], nil
}

// mapping is a read-only file mapped copy-on-write.
type mapping struct {
	path string
	data []byte
}

// LoadConsolidated reads a file written by SaveConsolidated or by Python
// tensordict's consolidate(filename=...). It memory-maps the file privately
// (copy-on-write: writes to the leaves never reach the file) instead of
// reading it, so loading costs the metadata parse only. The file is checked
// like FromConsolidated's input, with the same options.
//
// A file that another process truncates afterwards makes accesses to the
// lost pages fault; see LoadMemmap for which accesses are guarded. To be
// independent of the file, read it instead (os.ReadFile) and rebuild the
// TensorDict with FromConsolidated over tensor.StorageOf of its storage
// bytes, as LoadMemmap's InMemory does for directories.
//
// The leaves view the mapping until Release is called on the result; a
// loaded TensorDict that is dropped without Release keeps its mapping (and
// address space) until the process ends.
func LoadConsolidated(filename string, opts ...ConsolidatedOption) (*TensorDict, error) {
	cfg := newReadConfig(opts)
	if cfg.err != nil {
		return nil, fmt.Errorf("tensordict: LoadConsolidated: %w", cfg.err)
	}
	f, err := os.Open(filename)
	if err != nil {
		return nil, fmt.Errorf("tensordict: LoadConsolidated: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tensordict: LoadConsolidated: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("tensordict: LoadConsolidated %s: not a regular file", filename)
	}
	size := fi.Size()
	if size < 8 {
		return nil, fmt.Errorf("tensordict: LoadConsolidated %s: file is %d bytes, too short for the 8-byte length trailer", filename, size)
	}
	if size > int64(^uint(0)>>1) {
		return nil, fmt.Errorf("tensordict: LoadConsolidated %s: file of %d bytes is too large to map", filename, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("tensordict: LoadConsolidated %s: mmap: %w", filename, err)
	}
	var td *TensorDict
	err = mem.CatchFault(func() (err error) {
		td, err = fromConsolidatedBytes(data, &mapping{path: filename, data: data}, func() error { return syscall.Munmap(data) }, cfg)
		return err
	})
	if err != nil {
		syscall.Munmap(data)
		return nil, fmt.Errorf("tensordict: LoadConsolidated %s: %w", filename, err)
	}
	return td, nil
}

// fromConsolidatedBytes rebuilds a TensorDict over the whole bytes of a
// consolidated file. The storage is external, owned by owner, and freed by
// release.
func fromConsolidatedBytes(data []byte, owner any, release func() error, cfg readConfig) (*TensorDict, error) {
	stLen, meta, err := splitConsolidated(data, cfg)
	if err != nil {
		return nil, err
	}
	root, class, err := codec.Decode(meta, stLen, cfg.Limits)
	if err != nil {
		return nil, err
	}
	st := tensor.NewExternalStorage(data[:stLen:stLen], owner, release)
	td, err := buildFromMeta(root, st)
	if err != nil {
		return nil, err
	}
	td.cons.base, td.cons.end = 0, stLen
	td.class = class
	return td, nil
}

// Release releases the storages td owns, whatever their size: the storage
// of a consolidated TensorDict (Consolidate, ConsolidateInto,
// FromConsolidated, LoadConsolidated's mapping) or of one received new
// (FromRemoteInit in either mode, Broadcast), and every storage outside
// the Go heap or from the receive pool that td's leaves view (LoadMemmap's
// and Memmap's files, tensor.EmptyOffHeap). Mapped and off-heap memory is
// freed; receive-pool memory goes back to the pool at once if no code
// outside tdmpi took its bytes (Bytes, Data, Dense) and no transfer reads
// it, else as soon as nothing references it. Other heap storages, such as
// those of tensors the caller stored with Set, are the caller's and are
// left alone. Afterwards td's leaves and every tensor viewing a released
// storage are unusable: their accessors return errors wrapping
// tensor.ErrReleased (String prints <released>), for a 100-byte TensorDict
// as for a 1 GiB one.
//
// A nested TensorDict of a consolidated, received or LoadConsolidated
// TensorDict (GetTD) views part of the storage its root owns, so that its
// Release would break the root's other leaves: it returns an error
// wrapping ErrShared and releases nothing; release the root instead.
// Release is idempotent, and does nothing on a nil *TensorDict.
func (td *TensorDict) Release() error {
	if td == nil {
		return nil
	}
	var r releaser
	if td.cons != nil && td.cons.st != nil {
		if td.cons.part && !td.cons.st.Released() {
			return fmt.Errorf("tensordict: Release: a nested TensorDict views part of its root's consolidated storage: %w", ErrShared)
		}
		r.owned(td.cons.st)
	}
	r.tree(td)
	return errors.Join(r.errs...)
}

// releaser is Release's walk: the storages it released, each once, and
// their errors. The leaves of a consolidated or received TensorDict all
// view one storage, which takes no map to remember.
type releaser struct {
	first *tensor.Storage          // the first storage released
	more  map[*tensor.Storage]bool // the others
	errs  []error
}

// tree releases the storages of td's leaves and of its nested
// TensorDicts' leaves.
func (r *releaser) tree(td *TensorDict) {
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTensor:
			r.release(e.t.Storage())
		case kindTD:
			r.tree(e.td)
		}
	}
}

// release releases st, unless it is nil, a heap storage left to the
// collector, or released by r already.
func (r *releaser) release(st *tensor.Storage) {
	if st == nil || !(st.External() || tensorx.Reusable(st)) {
		return
	}
	r.owned(st)
}

// owned releases st, a storage td owns whatever its kind, unless r
// released it already.
func (r *releaser) owned(st *tensor.Storage) {
	if st == r.first || r.more[st] {
		return
	}
	switch {
	case r.first == nil:
		r.first = st
	case r.more == nil:
		r.more = map[*tensor.Storage]bool{st: true}
	default:
		r.more[st] = true
	}
	if err := st.Release(); err != nil {
		r.errs = append(r.errs, err)
	}
}
