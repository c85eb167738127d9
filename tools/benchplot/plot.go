// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Size of the plot image.
const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 5.5 * vg.Inch
)

// writePlot draws the bandwidth of every method against the payload size,
// both on log scales, one line per method in the order they first appear
// in pts, and writes it to w as a PNG image. title heads the plot.
func writePlot(w io.Writer, pts []point, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "payload size"
	p.Y.Label.Text = "one-way bandwidth, GB/s (median)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Tick.Marker = decadeTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	var order []string
	lines := map[string]plotter.XYs{}
	for _, pt := range pts {
		if pt.Size <= 0 || pt.Bandwidth <= 0 || math.IsInf(pt.Bandwidth, 0) || math.IsNaN(pt.Bandwidth) {
			continue // no place on a log scale
		}
		if _, ok := lines[pt.Method]; !ok {
			order = append(order, pt.Method)
		}
		lines[pt.Method] = append(lines[pt.Method], plotter.XY{X: float64(pt.Size), Y: pt.Bandwidth})
	}
	if len(order) == 0 {
		return fmt.Errorf("plot: no row with a positive size and bandwidth")
	}
	var args []any
	for _, m := range order {
		args = append(args, m, lines[m])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	// An axis that spans one value (one size, or one bandwidth) has no
	// extent on a log scale: give it a factor of two each way.
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		if a.Min == a.Max {
			a.Min, a.Max = a.Min/2, a.Max*2
		}
	}
	wt, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}

// sizeTicks marks powers of two on a byte axis: a labelled tick at every
// power of 32 (1 B, 32 B, 1 KiB, 32 KiB, 1 MiB, ...) and an unlabelled one
// at every other power of two.
type sizeTicks struct{}

// Ticks returns the ticks between lo and hi.
func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := 0; e < 63; e++ {
		v := math.Ldexp(1, e)
		if v > hi*1.0001 {
			break
		}
		if v < lo*0.9999 {
			continue
		}
		t := plot.Tick{Value: v}
		if e%5 == 0 {
			t.Label = formatSize(int64(v))
		}
		ticks = append(ticks, t)
	}
	// Label the ends of a range too short to hold a power of 32.
	labelled := false
	for _, t := range ticks {
		labelled = labelled || t.Label != ""
	}
	if !labelled && len(ticks) > 0 {
		ticks[0].Label = formatSize(int64(ticks[0].Value))
		ticks[len(ticks)-1].Label = formatSize(int64(ticks[len(ticks)-1].Value))
	}
	return ticks
}

// formatSize formats n bytes with the largest binary unit it reaches and
// at most two decimals: "512 B", "1 KiB", "1.5 MiB".
func formatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for u < len(units)-1 && math.Abs(v) >= 1024 {
		v /= 1024
		u++
	}
	if u == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	num := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	return num + " " + units[u]
}

// decadeTicks marks powers of ten, labelled in their shortest form
// ("0.001", "1", "1e-05"), with unlabelled ticks at 2 to 9 times each.
type decadeTicks struct{}

// Ticks returns the ticks between lo and hi.
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= 0 || lo > hi {
		return nil
	}
	var ticks []plot.Tick
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		p := math.Pow10(e)
		for m := 1; m < 10; m++ {
			v := p * float64(m)
			if v < lo*0.9999 || v > hi*1.0001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
