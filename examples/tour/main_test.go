// Copyright ©2026 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMETour checks that the README's tour is this program: the first Go
// block of the README equals main.go from its package clause on, so the
// tour that newcomers copy is built, vetted and run under mpirun by make test.
func TestREADMETour(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "```go\n")
	require.True(t, ok, "README.md has no Go block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok, "README.md's first Go block is not closed")

	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	i := strings.Index(string(src), "package main\n")
	require.GreaterOrEqual(t, i, 0, "main.go has no package clause")
	require.Equal(t, string(src[i:]), block, "README.md's tour and examples/tour/main.go differ")
}
