// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixture is Python tensordict's memmap directory, kept in the repository.
const fixture = "../../testdata/tensordict/mmap_example"

// runTdmpi runs the command line args in process and returns the exit
// status, standard output and standard error.
func runTdmpi(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &stdio{out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// checkGolden compares got with testdata/name, or rewrites the file with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), got, "output differs from %s (go test -update rewrites it)", path)
}

// writeConsolidated saves a TensorDict with leaves of many dtypes, nested
// levels, non-tensor values and a tensorclass to dir/td.bin and returns the
// file name.
func writeConsolidated(t *testing.T, dir string) string {
	t.Helper()
	td := tensordict.New(3)
	f32, err := tensor.FromSlice([]float32{0.1, 1.5, -2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 3, 4)
	require.NoError(t, err)
	require.NoError(t, td.Set(tensordict.K("obs"), f32))
	f64, err := tensor.FromSlice([]float64{math.NaN(), math.Inf(1), math.Inf(-1)}, 3)
	require.NoError(t, err)
	require.NoError(t, td.Set(tensordict.K("special"), f64))
	i64, err := tensor.FromSlice([]int64{math.MaxInt64, -1, 0}, 3)
	require.NoError(t, err)
	require.NoError(t, td.Set(tensordict.K("agent", "id"), i64))
	b, err := tensor.FromSlice([]bool{true, false, true}, 3)
	require.NoError(t, err)
	require.NoError(t, td.Set(tensordict.K("agent", "done"), b))
	c, err := tensor.FromSlice([]complex64{1 + 2i, -0.5i, 3}, 3)
	require.NoError(t, err)
	require.NoError(t, td.Set(tensordict.K("agent", "phase"), c))
	require.NoError(t, td.Set(tensordict.K("agent", "empty"), tensor.Zeros(tensor.Float16, 3, 0)))
	require.NoError(t, td.Set(tensordict.K("agent", "deep", "u8"), tensor.Full(tensor.Uint8, 255, 3, 2)))
	require.NoError(t, td.SetNonTensor(tensordict.K("label"), "a <tab>\there"))
	require.NoError(t, td.SetNonTensor(tensordict.K("agent", "cfg"), map[string]any{"lr": 0.5, "layers": []any{1, 2}}))
	name := filepath.Join(dir, "td.bin")
	require.NoError(t, td.SaveConsolidated(name))
	return name
}

// writeMemmap saves a TensorDict holding a tensorclass to dir/saved and
// returns the directory.
func writeMemmap(t *testing.T, dir string) string {
	t.Helper()
	td := tensordict.New(2)
	require.NoError(t, td.Set(tensordict.K("agent", "pos"), tensor.Ones(tensor.Float64, 2, 3)))
	require.NoError(t, td.SetNonTensor(tensordict.K("agent", "name"), "scout"))
	require.NoError(t, td.Set(tensordict.K("reward"), tensor.Zeros(tensor.BFloat16, 2)))
	sub, err := td.GetTD(tensordict.K("agent"))
	require.NoError(t, err)
	sub.SetClassName("Agent")
	saved := filepath.Join(dir, "saved")
	m, err := td.Memmap(saved, tensordict.MemmapNoSync())
	require.NoError(t, err)
	require.NoError(t, m.Release())
	return saved
}

func TestInspectGolden(t *testing.T) {
	dir := t.TempDir()
	consolidated := writeConsolidated(t, dir)
	saved := writeMemmap(t, dir)
	tests := []struct {
		golden string
		args   []string
	}{
		{"mmap_example.golden", []string{"inspect", fixture}},
		{"mmap_example.json.golden", []string{"inspect", "-json", fixture}},
		{"mmap_example_meta.golden", []string{"inspect", "-n", "0", fixture + "/meta.json"}},
		{"consolidated.golden", []string{"inspect", consolidated}},
		{"consolidated.json.golden", []string{"inspect", "-json", "-n", "4", consolidated}},
		{"tensorclass.golden", []string{"inspect", saved}},
		{"tensorclass.json.golden", []string{"inspect", "-json", saved}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, stdout, stderr := runTdmpi(tt.args...)
			require.Equal(t, exitOK, code, "stderr: %s", stderr)
			assert.Empty(t, stderr)
			checkGolden(t, tt.golden, strings.ReplaceAll(stdout, dir, "$TMP"))
		})
	}
}

func TestInspectJSONSchema(t *testing.T) {
	code, stdout, stderr := runTdmpi("inspect", "-json", fixture)
	require.Equal(t, exitOK, code, stderr)
	var got struct {
		Schema string `json:"schema"`
		Format string `json:"format"`
		Leaves int    `json:"leaves"`
		Bytes  int64  `json:"bytes"`
		Root   struct {
			BatchSize []int `json:"batch_size"`
			Entries   []struct {
				Key  string `json:"key"`
				Kind string `json:"kind"`
				Node struct {
					Entries []map[string]any `json:"entries"`
				} `json:"node"`
			} `json:"entries"`
		} `json:"root"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	assert.Equal(t, inspectSchema, got.Schema)
	assert.Equal(t, "memmap", got.Format)
	assert.Equal(t, 2, got.Leaves)
	assert.Equal(t, int64(2*8+2*2), got.Bytes)
	assert.Equal(t, []int{2, 1}, got.Root.BatchSize)
	require.Len(t, got.Root.Entries, 1)
	assert.Equal(t, "nested", got.Root.Entries[0].Key)
	assert.Equal(t, kindTensorDict, got.Root.Entries[0].Kind)
	byKey := map[string]map[string]any{}
	for _, e := range got.Root.Entries[0].Node.Entries {
		byKey[e["key"].(string)] = e
	}
	assert.Equal(t, []any{float64(1), float64(2)}, byKey["int64"]["values"])
	assert.Equal(t, "bfloat16", byKey["bfloat16"]["dtype"])
	assert.Equal(t, []any{"a string!"}, byKey["string"]["value"])
	assert.Equal(t, kindNonTensor, byKey["string"]["kind"])
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.bin")
	require.NoError(t, os.WriteFile(garbage, []byte("not a tensordict"), 0o644))
	emptyDir := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(emptyDir, 0o755))
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string // substrings
	}{
		{"no argument", []string{"inspect"}, exitUsage, []string{"want one DIR or FILE, have 0", "tdmpi inspect -h"}},
		{"two arguments", []string{"inspect", "a", "b"}, exitUsage, []string{"have 2 arguments"}},
		{"negative n", []string{"inspect", "-n", "-1", fixture}, exitUsage, []string{"-n -1"}},
		{"unknown flag", []string{"inspect", "-x", fixture}, exitUsage, []string{"flag provided but not defined: -x", "usage: tdmpi inspect"}},
		{"missing", []string{"inspect", filepath.Join(dir, "nope")}, exitFailure, []string{"tdmpi inspect: ", filepath.Join(dir, "nope")}},
		{"garbage file", []string{"inspect", garbage}, exitFailure, []string{garbage + ": tensordict: LoadConsolidated"}},
		{"directory without meta.json", []string{"inspect", emptyDir}, exitFailure, []string{emptyDir + ": tensordict: LoadMemmap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runTdmpi(tt.args...)
			assert.Equal(t, tt.code, code)
			assert.Empty(t, stdout)
			for _, s := range tt.stderr {
				assert.Contains(t, stderr, s)
			}
		})
	}
}

func TestLeadingValues(t *testing.T) {
	f16 := tensor.Full(tensor.Float16, 0.5, 2, 2)
	i8, err := tensor.FromSlice([]int8{-128, 127}, 2)
	require.NoError(t, err)
	c128, err := tensor.FromSlice([]complex128{complex(1, -1)}, 1)
	require.NoError(t, err)
	scalar, err := tensor.FromSlice([]float64{2.5})
	require.NoError(t, err)
	special, err := tensor.FromSlice([]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.1})
	require.NoError(t, err)
	flags, err := tensor.FromSlice([]bool{true, false})
	require.NoError(t, err)
	tr, err := tensor.Arange(tensor.Int32, 0, 6, 1)
	require.NoError(t, err)
	tr2, err := tr.Reshape(2, 3)
	require.NoError(t, err)
	tr2, err = tr2.Transpose(0, 1) // not contiguous: [[0 3] [1 4] [2 5]]
	require.NoError(t, err)
	num := func(ss ...string) []any {
		out := make([]any, len(ss))
		for i, s := range ss {
			out[i] = json.Number(s)
		}
		return out
	}
	tests := []struct {
		name  string
		t     *tensor.Tensor
		n     int
		want  []any
		trunc bool
	}{
		{"float16 truncated", f16, 3, num("0.5", "0.5", "0.5"), true},
		{"int8 bounds", i8, 6, num("-128", "127"), false},
		{"complex128", c128, 6, []any{"1-1i"}, false},
		{"scalar", scalar, 6, num("2.5"), false},
		{"non-finite floats as strings", special, 4, []any{"NaN", "+Inf", "-Inf", json.Number("0.1")}, false},
		{"bools", flags, 2, []any{true, false}, false},
		{"transposed view in logical order", tr2, 6, num("0", "3", "1", "4", "2", "5"), false},
		{"none", tr2, 0, []any{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals, trunc := leadingValues(tt.t, tt.n)
			assert.Equal(t, tt.trunc, trunc)
			assert.Equal(t, tt.want, vals)
		})
	}
}
