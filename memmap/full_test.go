package memmap

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestFullValues: Full writes what tensor.Full holds, element by element,
// for every dtype, in files of one element and of several write chunks.
func TestFullValues(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		dt tensor.DType
		v  float64
	}{
		{tensor.Bool, 1}, {tensor.Uint8, 200}, {tensor.Int8, -3}, {tensor.Int16, -300},
		{tensor.Int32, 1 << 30}, {tensor.Int64, -5}, {tensor.Float16, 1.5}, {tensor.BFloat16, -2},
		{tensor.Float32, 0.25}, {tensor.Float64, math.Copysign(0, -1)}, {tensor.Float64, 0},
		{tensor.Complex64, 3}, {tensor.Complex128, -7.5},
	}
	for i, c := range cases {
		for _, n := range []int{1, 3, 300_001} {
			want := tensor.Full(c.dt, c.v, n)
			path := filepath.Join(dir, fmt.Sprintf("%d-%v-%d", i, c.dt, n))
			got, err := Full(c.dt, c.v, path, []int{n})
			require.NoError(t, err, "%v %v [%d]", c.dt, c.v, n)
			wb, err := want.Bytes()
			require.NoError(t, err)
			gb, err := got.Bytes()
			require.NoError(t, err)
			assert.Equal(t, wb, gb, "%v %v [%d]", c.dt, c.v, n)
			disk, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, wb, disk, "the file holds the elements")
			require.NoError(t, Close(got))
		}
	}
	anon, err := Full(tensor.Int16, 9, "", []int{2, 3})
	require.NoError(t, err)
	assert.True(t, anon.EqScalar(9).All(), "anonymous")
	require.NoError(t, Close(anon))
}

// TestFullErrors: Full returns an error, creating no file, for a value the
// dtype cannot hold and for a tensor too large for memory (or the disk),
// where it panicked through tensor.Full (issue 41: tensor.Full panics with
// an error value for them).
func TestFullErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name  string
		dt    tensor.DType
		v     float64
		shape []int
		want  string
	}{
		{"NaN into int32", tensor.Int32, math.NaN(), []int{4}, "NaN"},
		{"Inf into int64", tensor.Int64, math.Inf(1), []int{4}, "Inf"},
		{"1e10 into int32", tensor.Int32, 1e10, []int{4}, "int32"},
		{"8 PiB", tensor.Float64, 1, []int{1 << 50}, "Full"},
		{"overflow", tensor.Float64, 1, []int{1 << 40, 1 << 40}, "Full"},
		{"negative", tensor.Float64, 1, []int{-1}, "Full"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "8 PiB" && !fallocates(t, dir) {
				// Reserving would write zeros until the disk is full.
				t.Skip("the file system has no fallocate")
			}
			path := filepath.Join(dir, c.name)
			var x *tensor.Tensor
			var err error
			require.NotPanics(t, func() { x, err = Full(c.dt, c.v, path, c.shape) })
			require.Error(t, err)
			assert.Nil(t, x)
			assert.ErrorContains(t, err, c.want)
			assert.ErrorContains(t, err, "memmap: Full")
			_, statErr := os.Stat(path)
			assert.ErrorIs(t, statErr, os.ErrNotExist, "no file is left")
		})
	}
}

// fallocates reports whether the file system of dir supports fallocate.
func fallocates(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "probe")
	require.NoError(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	return unix.Fallocate(int(f.Fd()), 0, 0, 1) == nil
}
