// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportDirection checks the dependency rules of DESIGN.md on the
// non-test files of the module: the data structure's packages reach MPI
// only through the protocol packages, and the protocol packages do not
// reach back into the data structure.
func TestImportDirection(t *testing.T) {
	const mod = "github.com/tdmpi/tdmpi/"
	tests := []struct {
		dir    string
		banned []string
	}{
		{"tensordict", []string{"mpi", "internal/mpix"}},
		{"tensor", []string{"mpi", "internal/mpix", "group", "tensordict", "memmap"}},
		{"memmap", []string{"mpi", "internal/mpix", "group", "tensordict"}},
		{"internal/coll", []string{"tensordict"}},
		{"internal/xfer", []string{"tensordict"}},
		{"internal/wire", []string{"mpi", "group", "tensordict"}},
		{"internal/codec", []string{"mpi", "group", "tensordict"}},
	}
	for _, tt := range tests {
		files, err := filepath.Glob(filepath.Join("..", tt.dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", tt.dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range tt.banned {
					if path == mod+b {
						t.Errorf("%s imports %s", f, path)
					}
				}
			}
		}
	}
}
