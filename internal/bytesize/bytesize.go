// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units maps the units Parse accepts, lower-cased, to their multipliers.
// K, M and G alone are binary, like KiB, MiB and GiB; KB, MB and GB are
// decimal.
var units = map[string]int64{
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

// Parse parses a size in bytes: a non-negative integer followed by an
// optional unit (B, K, KiB, M, MiB, G, GiB, KB, MB, GB; case does not
// matter, spaces between the number and the unit are allowed). Errors name
// s.
func Parse(s string) (int64, error) {
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
		return 0, fmt.Errorf("size %q: %w", s, err.(*strconv.NumError).Err)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB or GiB)", s, t[i:])
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}

// Format formats n bytes for people, with the largest binary unit that
// keeps the number at least 1 and at most two decimals: "8 B", "64 KiB",
// "1.5 MiB".
func Format(n int64) string {
	names := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for u < len(names)-1 && math.Abs(v) >= 1024 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	num := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	return num + " " + names[u]
}

// Exact formats n bytes exactly, in the form Parse reads back, with the
// largest binary unit that divides n: "8B", "64KiB", "3GiB".
func Exact(n int64) string {
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
