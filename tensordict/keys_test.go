// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCompareJoined checks compareJoined against strings.Compare of the
// joined keys, on keys whose parts are empty, hold dots, or share
// prefixes.
func TestCompareJoined(t *testing.T) {
	parts := []string{"", ".", "a", "a.", "a.b", "ab", "b", "-", "/", "é", "a\x00"}
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() Key {
		k := make(Key, rng.IntN(4))
		for i := range k {
			k[i] = parts[rng.IntN(len(parts))]
		}
		return k
	}
	sign := func(v int) int { return min(max(v, -1), 1) }
	for range 20000 {
		a, b := key(), key()
		want := strings.Compare(strings.Join(a, "."), strings.Join(b, "."))
		if got := sign(compareJoined(a, b)); got != want {
			t.Fatalf("compareJoined(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}
