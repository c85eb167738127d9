// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a number of bytes given on the command line, as "8B",
// "64KiB" or "256MiB". It implements flag.Value.
type byteSize int64

// sizeUnits maps the units parseSize accepts, lower-cased, to their
// multipliers. K, M and G alone are binary, like KiB, MiB and GiB; KB, MB
// and GB are decimal.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"k":   1 << 10,
	"kib": 1 << 10,
	"m":   1 << 20,
	"mib": 1 << 20,
	"g":   1 << 30,
	"gib": 1 << 30,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
}

// parseSize parses a size in bytes: a non-negative integer followed by an
// optional unit (B, K, KiB, M, MiB, G, GiB, KB, MB, GB; case does not
// matter, spaces between the number and the unit are allowed).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 8B, 64KiB or 256MiB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %v", s, err.(*strconv.NumError).Err)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB or GiB)", s, t[i:])
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}

// formatSize formats n bytes with the largest binary unit that keeps the
// number at least 1: "8 B", "64 KiB", "1.5 MiB".
func formatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for u < len(units)-1 && math.Abs(v) >= 1024 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	num := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	return num + " " + units[u]
}

// String returns the size in the form parseSize reads back, such as "64KiB".
func (b *byteSize) String() string {
	if b == nil {
		return "0B"
	}
	n := int64(*b)
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// Set parses s with parseSize.
func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}
