// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tdmpi/tdmpi/internal/bytesize"
)

// result is one measured point.
type result struct {
	Size     int64   // payload bytes
	Method   string  // method name
	Pattern  string  // patternP2P or patternBcast
	Baseline string  // the raw method the ratio compares with; "" for raw methods
	Leaves   int     // tensor leaves (0 for raw methods)
	Reps     int     // timed repetitions
	Batch    int     // steps per repetition (after the first)
	Median   float64 // median one-way time, seconds
	Min      float64 // fastest one-way time, seconds
	Ratio    float64 // Median over the baseline's Median at the same size; 1 for raw methods
}

// Bandwidth returns the payload bytes over the median one-way time, in
// GB/s (10^9 bytes per second).
func (r result) Bandwidth() float64 {
	if r.Median <= 0 {
		return 0
	}
	return float64(r.Size) / r.Median / 1e9
}

// setRatios fills the Ratio of every result from the results of its
// baseline at the same size.
func setRatios(rs []result) {
	base := map[string]float64{}
	for _, r := range rs {
		if r.Baseline == "" {
			base[r.Method+"/"+strconv.FormatInt(r.Size, 10)] = r.Median
		}
	}
	for i, r := range rs {
		if r.Baseline == "" {
			rs[i].Ratio = 1
			continue
		}
		if b := base[r.Baseline+"/"+strconv.FormatInt(r.Size, 10)]; b > 0 {
			rs[i].Ratio = r.Median / b
		}
	}
}

// formatDuration formats seconds with three significant digits and a unit
// fit for the magnitude: "712 ns", "1.25 us", "61.3 ms".
func formatDuration(s float64) string {
	d := time.Duration(s * 1e9)
	var v float64
	var unit string
	switch {
	case d < time.Microsecond:
		v, unit = s*1e9, "ns"
	case d < time.Millisecond:
		v, unit = s*1e6, "us"
	case d < time.Second:
		v, unit = s*1e3, "ms"
	default:
		v, unit = s, "s"
	}
	return strconv.FormatFloat(v, 'f', max(0, 2-magnitude(v)), 64) + " " + unit
}

// magnitude returns the number of digits before the point of v >= 0, less
// one: 0 for 1.5, 2 for 712.
func magnitude(v float64) int {
	m := 0
	for v >= 10 {
		v /= 10
		m++
	}
	return m
}

// formatRatio formats a ratio to a baseline as "1.23x", or "-" if unknown.
func formatRatio(r result) string {
	if r.Ratio <= 0 {
		return "-"
	}
	return strconv.FormatFloat(r.Ratio, 'f', 2, 64) + "x"
}

// writeTable prints the results as an aligned table: the median one-way
// time, its bandwidth, its ratio to the baseline, and the fastest
// repetition's one-way time ("best").
func writeTable(w io.Writer, rs []result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tmethod\tleaves\tone-way\tGB/s\tvs raw\tbaseline\tbest")
	last := int64(-1)
	for _, r := range rs {
		size := ""
		if r.Size != last {
			size = bytesize.Format(r.Size)
			last = r.Size
		}
		leaves, base := "", ""
		if r.Leaves > 0 {
			leaves = strconv.Itoa(r.Leaves)
		}
		if r.Baseline != "" {
			base = r.Baseline
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s\n",
			size, r.Method, leaves, formatDuration(r.Median), r.Bandwidth(), formatRatio(r), base, formatDuration(r.Min))
	}
	return tw.Flush()
}

// csvHeader is the header row of the CSV file.
var csvHeader = []string{
	"size_bytes", "method", "pattern", "baseline", "leaves", "reps", "batch",
	"oneway_median_s", "oneway_min_s", "bandwidth_GBps", "ratio",
}

// writeCSV writes the results as CSV with csvHeader.
func writeCSV(w io.Writer, rs []result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rs {
		rec := []string{
			strconv.FormatInt(r.Size, 10), r.Method, r.Pattern, r.Baseline,
			strconv.Itoa(r.Leaves), strconv.Itoa(r.Reps), strconv.Itoa(r.Batch),
			g(r.Median), g(r.Min), g(r.Bandwidth()), g(r.Ratio),
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
