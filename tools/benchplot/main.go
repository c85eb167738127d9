// Copyright ©2026 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Command benchplot draws the CSV file that `tdmpi bench -out NAME` writes
// (NAME.csv) as a PNG image: one-way bandwidth against payload size, both on
// log scales, one line per method.
//
// Usage:
//
//	go run . [-o out.png] [-title text] bench.csv
//
// Without -o the image goes beside the CSV file, with the extension .png.
// `make bench` runs it on bin/tdmpi-bench.csv, and `make bench-plot` runs it
// alone.
//
// benchplot is a module of its own (tools/benchplot/go.mod), so that the
// plotting library and its fonts stay out of the module graph of programs
// that use tdmpi. It reads only the CSV file and imports nothing of tdmpi.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// run parses args, reads the CSV file they name and writes its plot.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchplot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the PNG image to `file` (default: the CSV file's name with .png)")
	title := fs.String("title", "tdmpi bench", "title of the plot")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: benchplot [-o out.png] [-title text] bench.csv")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one CSV file, got %d arguments", fs.NArg())
	}
	in := fs.Arg(0)
	if *out == "" {
		*out = strings.TrimSuffix(in, filepath.Ext(in)) + ".png"
	}

	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	pts, err := readCSV(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}

	w, err := os.Create(*out)
	if err != nil {
		return err
	}
	err = writePlot(w, pts, *title)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return fmt.Errorf("%s: %w", *out, err)
	}
	fmt.Fprintf(stderr, "benchplot: wrote %s\n", *out)
	return nil
}
