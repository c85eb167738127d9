// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleCSV is what tdmpi bench writes: two sizes, two methods.
const sampleCSV = `size_bytes,method,pattern,baseline,leaves,reps,batch,oneway_median_s,oneway_min_s,bandwidth_GBps,ratio
8,raw-p2p,p2p,,0,10,100,1e-06,8e-07,0.008,1
8,initremote,p2p,raw-p2p,8,10,50,5e-06,4e-06,0.0016,5
1048576,raw-p2p,p2p,,0,5,1,0.0002,0.00019,5.24288,1
1048576,initremote,p2p,raw-p2p,16,5,1,0.0003,0.00025,3.49525,1.5
`

func TestReadCSV(t *testing.T) {
	pts, err := readCSV(strings.NewReader(sampleCSV))
	require.NoError(t, err)
	require.Len(t, pts, 4)
	assert.Equal(t, point{Size: 1 << 20, Method: "initremote", Bandwidth: 3.49525}, pts[3])

	// Columns are found by name.
	pts, err = readCSV(strings.NewReader("bandwidth_GBps,extra,method,size_bytes\n2.5,x,raw-p2p,64\n"))
	require.NoError(t, err)
	assert.Equal(t, []point{{Size: 64, Method: "raw-p2p", Bandwidth: 2.5}}, pts)

	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty file"},
		{"no bandwidth column", "size_bytes,method\n8,raw-p2p\n", `no column "bandwidth_GBps"`},
		{"bad size", "size_bytes,method,bandwidth_GBps\neight,raw-p2p,1\n", "line 2: size_bytes"},
		{"bad bandwidth", "size_bytes,method,bandwidth_GBps\n8,raw-p2p,fast\n", "line 2: bandwidth_GBps"},
		{"short row", "size_bytes,method,bandwidth_GBps\n8,raw-p2p\n", "line 2: 2 fields, the header has 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readCSV(strings.NewReader(tt.in))
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestWritePlot(t *testing.T) {
	pts, err := readCSV(strings.NewReader(sampleCSV))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, writePlot(&b, pts, "test"))
	img, err := png.Decode(&b)
	require.NoError(t, err)
	assert.Greater(t, img.Bounds().Dx(), 600)
	assert.Greater(t, img.Bounds().Dy(), 400)

	// One size, one method: both axes span a single value (tdmpi bench
	// -min 1KiB -max 1KiB -methods raw-p2p panicked inside gonum/plot).
	b.Reset()
	require.NoError(t, writePlot(&b, pts[:1], "one point"))
	_, err = png.Decode(&b)
	require.NoError(t, err)

	err = writePlot(&b, []point{{Size: 8, Method: "raw-p2p"}}, "no data")
	assert.ErrorContains(t, err, "no row with a positive size and bandwidth")
}

func TestTicks(t *testing.T) {
	var labels []string
	for _, tk := range (sizeTicks{}).Ticks(8, 256<<20) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	assert.Equal(t, []string{"32 B", "1 KiB", "32 KiB", "1 MiB", "32 MiB"}, labels)
	short := (sizeTicks{}).Ticks(64, 512)
	require.Len(t, short, 4)
	assert.Equal(t, "64 B", short[0].Label)
	assert.Equal(t, "512 B", short[3].Label)

	labels = nil
	for _, tk := range (decadeTicks{}).Ticks(2e-5, 6.5) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	assert.Equal(t, []string{"0.0001", "0.001", "0.01", "0.1", "1"}, labels)
	assert.Nil(t, (decadeTicks{}).Ticks(0, 1))
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 256 << 20: "256 MiB"} {
		assert.Equal(t, want, formatSize(n), "formatSize(%d)", n)
	}
}

// TestRun runs the command on a CSV file: the image goes beside it.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "b.csv")
	require.NoError(t, os.WriteFile(in, []byte(sampleCSV), 0o644))
	var stderr bytes.Buffer
	require.NoError(t, run([]string{"-title", "t", in}, &stderr))
	assert.Equal(t, "benchplot: wrote "+filepath.Join(dir, "b.png")+"\n", stderr.String())
	f, err := os.Open(filepath.Join(dir, "b.png"))
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)

	out := filepath.Join(dir, "other.png")
	require.NoError(t, run([]string{"-o", out, in}, &stderr))
	assert.FileExists(t, out)

	assert.ErrorContains(t, run(nil, &stderr), "want one CSV file, got 0 arguments")
	assert.ErrorContains(t, run([]string{filepath.Join(dir, "missing.csv")}, &stderr), "no such file")

	// A CSV file with no plottable row leaves no image behind.
	empty := filepath.Join(dir, "empty.csv")
	require.NoError(t, os.WriteFile(empty, []byte("size_bytes,method,bandwidth_GBps\n"), 0o644))
	assert.ErrorContains(t, run([]string{empty}, &stderr), "no row with a positive size")
	assert.NoFileExists(t, filepath.Join(dir, "empty.png"))
}
