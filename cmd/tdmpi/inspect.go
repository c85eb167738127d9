// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/tensordict"
)

var inspectCmd = &command{
	name:  "inspect",
	args:  "[-json] [-n N] DIR|FILE",
	short: "print a saved TensorDict (memmap directory or consolidated file)",
	long: `
Inspect prints the TensorDict saved in DIR, a memmap directory written by
Memmap or by Python tensordict's memmap (DIR/meta.json may be given
instead), or in FILE, a consolidated file written by SaveConsolidated or by
Python's consolidate(filename=...). It shows every entry as a tree: tensor
leaves with their dtype, shape, size and first elements, nested TensorDicts
with their batch size, and non-tensor values.

With -json it prints one JSON object whose schema ("tdmpi.inspect/v1") is
described by 'go doc github.com/tdmpi/tdmpi/cmd/tdmpi'.

Inspect does not start MPI: it runs without mpirun.`,
	flags: func(fs *flag.FlagSet, sio *stdio) func([]string) error {
		asJSON := fs.Bool("json", false, "print JSON instead of a tree")
		n := fs.Int("n", 6, "print the first `N` elements of each tensor (0: none)")
		return func(args []string) error {
			if len(args) != 1 {
				return usagef("want one DIR or FILE, have %d arguments", len(args))
			}
			if *n < 0 {
				return usagef("-n %d: want a count of 0 or more", *n)
			}
			if !*asJSON {
				return withLoaded(args[0], func(td *tensordict.TensorDict, format string) error {
					return td.WriteTree(sio.out, tensordict.TreeOptions{Title: args[0] + ": " + format, Values: *n})
				})
			}
			rep, err := inspect(args[0], *n)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(sio.out)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(rep)
		}
	},
}

// inspect loads the TensorDict saved at path and describes it, with the
// first n elements of each tensor, for inspect -json.
func inspect(path string, n int) (*inspectReport, error) {
	var rep *inspectReport
	err := withLoaded(path, func(td *tensordict.TensorDict, format string) error {
		rep = &inspectReport{Schema: inspectSchema, Path: path, Format: format}
		rep.Root = describe(td, n, rep)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// withLoaded loads the TensorDict saved at path, a memmap directory (or its
// meta.json) or a consolidated file, calls fn with it and the name of its
// format ("memmap" or "consolidated"), and releases it. Files are mapped
// copy-on-write: inspect never writes to them.
func withLoaded(path string, fn func(td *tensordict.TensorDict, format string) error) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err // *PathError names the path
	}
	var (
		td     *tensordict.TensorDict
		format string
	)
	switch {
	case fi.IsDir():
		format = "memmap"
		td, err = tensordict.LoadMemmap(path, tensordict.CopyOnWrite())
	case filepath.Base(path) == "meta.json":
		format = "memmap"
		td, err = tensordict.LoadMemmap(filepath.Dir(path), tensordict.CopyOnWrite())
	case fi.Mode().IsRegular():
		format = "consolidated"
		td, err = tensordict.LoadConsolidated(path)
	default:
		return fmt.Errorf("%s: not a directory or a regular file (%v)", path, fi.Mode().Type())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	err = fn(td, format)
	if rerr := td.Release(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("%s: %w", path, rerr))
	}
	return err
}
