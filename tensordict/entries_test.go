// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// Nodes below and above indexMin find, replace and delete entries alike,
// keeping insertion order.
func TestEntryLookupAcrossIndexMin(t *testing.T) {
	for _, n := range []int{1, indexMin - 1, indexMin, 3 * indexMin} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			td := New()
			var want []string
			for i := range n {
				name := fmt.Sprintf("k%02d", i)
				require.NoError(t, td.Set(K(name), tensor.Full(tensor.Float32, float64(i), 1)))
				want = append(want, name)
			}
			require.Equal(t, n >= indexMin, td.index != nil, "index map from indexMin entries on")
			// Replace the last entry: same place, new value.
			last := want[n-1]
			require.NoError(t, td.Set(K(last), tensor.Full(tensor.Float32, -1, 1)))
			// Delete every other entry from the front.
			for i := 0; i < n; i += 2 {
				require.NoError(t, td.Del(K(want[i])))
			}
			kept := []string{}
			for i := 1; i < n; i += 2 {
				kept = append(kept, want[i])
			}
			require.Equal(t, kept, keyStrings(td.Keys()))
			for i, name := range kept {
				j, ok := td.lookup(name)
				require.True(t, ok, name)
				require.Equal(t, i, j, name)
			}
			for i := 0; i < n; i += 2 {
				_, ok := td.lookup(want[i])
				require.False(t, ok, "deleted %s still found", want[i])
				require.False(t, td.Has(K(want[i])))
			}
			if n%2 == 0 {
				x, err := td.Get(K(last))
				require.NoError(t, err)
				v, err := tensor.Data[float32](x)
				require.NoError(t, err)
				require.Equal(t, []float32{-1}, v)
			}
		})
	}
}
