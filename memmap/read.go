package memmap

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/memmapdir"
	"github.com/tdmpi/tdmpi/tensor"
)

// ReadFile reads a tensor file, as FromFile would map it, into a new
// tensor in memory: the file holds the elements in row-major order,
// little-endian, with no header, and may be longer than the tensor but not
// shorter. The result does not depend on the file afterwards, so another
// process truncating or rewriting it cannot affect it (where a mapping
// would raise SIGBUS). The same files as FromFile's are refused (symbolic
// links, anything not a regular file), and a tensor larger than the memory
// available is an error wrapping mem's ErrNoMemory before anything is
// allocated.
func ReadFile(filename string, dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	nb, err := tensor.NBytesOf(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("memmap: ReadFile %s: %w", filename, err)
	}
	if nb == 0 {
		return tensor.Zeros(dt, shape...), nil
	}
	abs, err := filepath.Abs(filename)
	if err != nil {
		return nil, fmt.Errorf("memmap: ReadFile %s: %w", filename, err)
	}
	fd, fi, err := memmapdir.OpenRegular("ReadFile", abs, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if fi.Size() < int64(nb) {
		return nil, fmt.Errorf("memmap: ReadFile %s: file has %d bytes, %v%v needs %d", abs, fi.Size(), dt, shape, nb)
	}
	b, err := mem.AllocChecked(nb)
	if err != nil {
		return nil, fmt.Errorf("memmap: ReadFile %s: %w", abs, err)
	}
	if _, err := io.ReadFull(io.NewSectionReader(fd, 0, int64(nb)), b); err != nil {
		return nil, fmt.Errorf("memmap: ReadFile %s: reading %d bytes: %w", abs, nb, err)
	}
	return tensor.FromStorage(dt, tensor.StorageOf(b), 0, shape...)
}
