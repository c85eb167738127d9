// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// remoteMemmapFile is the name of the file FromRemoteInit with WithMemmap
// writes in its prefix directory.
const remoteMemmapFile = "consolidated.td"

// createMemmapStorage creates prefix/consolidated.td, maps its first total
// bytes as the storage to receive into (copying inline into it when the
// storage came with the header) and returns it with a finish function:
// finish(true) appends the metadata JSON and its int64 little-endian
// length after the storage, which makes the file tensordict's consolidated
// single-file format, and flushes the mapping; finish(false) unmaps and
// removes the file.
func createMemmapStorage(prefix string, total int64, inline, meta []byte) (*tensor.Storage, func(bool) error, error) {
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, nil, fmt.Errorf("WithMemmap: %w", err)
	}
	path := filepath.Join(prefix, remoteMemmapFile)
	var t *tensor.Tensor
	if total > 0 {
		var err error
		t, err = memmap.Empty(tensor.Uint8, path, []int{int(total)}, memmap.ExistsOK())
		if err != nil {
			return nil, nil, fmt.Errorf("WithMemmap: %w", err)
		}
	}
	st := tensor.NewStorage(0)
	if t != nil {
		st = t.Storage()
		copy(st.Bytes(), inline)
	}
	finish := func(ok bool) error {
		if !ok {
			var errs []error
			if t != nil {
				errs = append(errs, memmap.Close(t))
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}
		trimmed := meta
		for len(trimmed) > 0 && trimmed[len(trimmed)-1] == ' ' {
			trimmed = trimmed[:len(trimmed)-1]
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o666)
		if err != nil {
			return fmt.Errorf("WithMemmap: %w", err)
		}
		tail := binary.LittleEndian.AppendUint64(append([]byte(nil), trimmed...), uint64(len(trimmed)))
		_, werr := f.WriteAt(tail, total)
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fmt.Errorf("WithMemmap: writing the metadata of %s: %w", path, err)
		}
		if t != nil {
			if err := memmap.Flush(t); err != nil {
				return fmt.Errorf("WithMemmap: %w", err)
			}
		}
		return nil
	}
	return st, finish, nil
}
