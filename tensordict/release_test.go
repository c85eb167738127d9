// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tdmpi/tdmpi/tensor"
)

// releaseTree returns a TensorDict of n leaves under nested nodes of 4,
// over distinct external storages (each leaf its own, or, shared, one for
// every perStorage leaves), each of whose release functions counts its
// calls and fails with the error of failing, if any.
func releaseTree(t testing.TB, n, perStorage int, failing map[int]error) (td *TensorDict, calls []int) {
	t.Helper()
	td = New()
	nst := (n + perStorage - 1) / perStorage
	calls = make([]int, nst)
	sts := make([]*tensor.Storage, nst)
	for i := range sts {
		sts[i] = tensor.NewExternalStorage(make([]byte, 8), nil, func() error {
			calls[i]++
			return failing[i]
		})
	}
	for i := range n {
		st := sts[i*nst/n]
		x, err := tensor.FromStorage(tensor.Float64, st, 0, 1)
		require.NoError(t, err)
		require.NoError(t, td.Set(K(fmt.Sprintf("g%d", i/4), fmt.Sprintf("x%d", i)), x))
	}
	return td, calls
}

// Release releases every external storage its leaves view exactly once,
// however many leaves share it and however many storages there are,
// leaves heap storages to the collector, and joins the errors of the
// releases that failed.
func TestReleaseEachStorageOnce(t *testing.T) {
	errA, errB := errors.New("a failed"), errors.New("b failed")
	tests := []struct {
		name    string
		leaves  int
		per     int // leaves per storage
		failing map[int]error
	}{
		{"one leaf", 1, 1, nil},
		{"few", 5, 1, nil},
		{"shared", 9, 3, nil},
		{"one storage", 16, 16, nil},
		{"many", 50, 1, nil},
		{"many, shared", 90, 3, nil},
		{"errors", 30, 1, map[int]error{0: errA, 19: errB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, calls := releaseTree(t, tt.leaves, tt.per, tt.failing)
			// A heap leaf, which Release leaves alone.
			require.NoError(t, td.Set(K("heap"), tensor.Zeros(tensor.Float64, 2)))
			err := td.Release()
			for i, c := range calls {
				assert.Equal(t, 1, c, "storage %d released %d times", i, c)
			}
			if len(tt.failing) == 0 {
				require.NoError(t, err)
			}
			for _, want := range tt.failing {
				assert.ErrorIs(t, err, want)
			}
			x, gerr := td.Get(K("heap"))
			require.NoError(t, gerr)
			assert.False(t, x.Storage().Released(), "a heap storage was released")
			require.NoError(t, td.Release(), "a second Release")
			for i, c := range calls {
				assert.Equal(t, 1, c, "storage %d released again", i)
			}
		})
	}
}

// BenchmarkRelease releases a 16-leaf TensorDict whose leaves view one
// storage, as a received result's do: the walk allocates nothing.
func BenchmarkRelease(b *testing.B) {
	tds := make([]*TensorDict, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if len(tds) == 0 {
			b.StopTimer()
			for range cap(tds) {
				td, _ := releaseTree(b, 16, 16, nil)
				tds = append(tds, td)
			}
			b.StartTimer()
		}
		if err := tds[len(tds)-1].Release(); err != nil {
			b.Fatal(err)
		}
		tds = tds[:len(tds)-1]
	}
}
