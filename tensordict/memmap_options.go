package tensordict

import (
	"errors"
	"fmt"
	"runtime"
)

// MemmapOption configures Memmap, MemmapInPlace and MemmapLike.
type MemmapOption func(*memmapConfig)

type memmapConfig struct {
	existsOK bool
	workers  int
	noSync   bool
	err      error // an invalid option
}

// MemmapExistsOK lets Memmap write into a directory that already holds a
// saved TensorDict, overwriting its files (tensordict's existsok=True, which
// is Python's default). Without it, an existing meta.json or tensor file is
// an error. Before anything is overwritten, the old meta.json files are
// removed, so an interrupted overwrite never loads as a mix of old and new.
func MemmapExistsOK() MemmapOption { return func(c *memmapConfig) { c.existsOK = true } }

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
	c := memmapConfig{workers: min(2*runtime.GOMAXPROCS(0), 16)}
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
