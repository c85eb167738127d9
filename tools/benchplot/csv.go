// Copyright ©2026 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// point is one row of the CSV file: a method's bandwidth at one size.
type point struct {
	Size      int64   // payload bytes
	Method    string  // method name, as tdmpi bench names it
	Bandwidth float64 // GB/s (10^9 bytes per second), from the median one-way time
}

// readCSV reads the rows of a CSV file of tdmpi bench: the columns
// size_bytes, method and bandwidth_GBps, found by name in the header, so
// that columns added or moved later do not matter.
func readCSV(r io.Reader) ([]point, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file, want a header row")
	}
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, name := range header {
		col[name] = i
	}
	for _, name := range []string{"size_bytes", "method", "bandwidth_GBps"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("header has no column %q: %q", name, header)
		}
	}
	var pts []point
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return pts, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) != len(header) {
			return nil, fmt.Errorf("line %d: %d fields, the header has %d", line, len(rec), len(header))
		}
		size, err := strconv.ParseInt(rec[col["size_bytes"]], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: size_bytes: %w", line, err)
		}
		bw, err := strconv.ParseFloat(rec[col["bandwidth_GBps"]], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: bandwidth_GBps: %w", line, err)
		}
		pts = append(pts, point{Size: size, Method: rec[col["method"]], Bandwidth: bw})
	}
}
