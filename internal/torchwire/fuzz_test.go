// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/torchwire"
	"github.com/tdmpi/tdmpi/internal/torchwire/wirefixture"
)

func addFixtureSeeds(f *testing.F) {
	cases, err := wirefixture.Load()
	require.NoError(f, err)
	for _, c := range cases {
		if c.Name == "wide" {
			continue // 76 KiB: a slow seed
		}
		for _, md := range c.Modes {
			f.Add(md.Payload[1])
		}
	}
}

// FuzzDecode: whatever the bytes, Decode returns a value or an error and
// never panics, and a value it returns pickles again (Encode) to a pickle
// that decodes to the same plain value.
func FuzzDecode(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, p []byte) {
		lim := torchwire.Limits{MaxDepth: 64, MaxNodes: 1 << 14}
		v, err := torchwire.Decode(p, lim)
		if err != nil {
			return
		}
		plain, err := torchwire.Plain(v)
		require.NoError(t, err)
		q, err := torchwire.Encode(plain)
		require.NoError(t, err)
		back, err := torchwire.Decode(q, torchwire.Limits{})
		require.NoError(t, err)
		again, err := torchwire.Plain(back)
		require.NoError(t, err)
		if !hasNaN(plain) {
			assert.Equal(t, plain, again)
		}
	})
}

func hasNaN(v any) bool {
	switch x := v.(type) {
	case float64:
		return x != x
	case []any:
		for _, e := range x {
			if hasNaN(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasNaN(e) {
				return true
			}
		}
	}
	return false
}

// FuzzParseMeta: a description ParseMeta accepts marshals (unless Python
// could not take it back: a misaligned complex128 leaf, a reserved child
// name) to a pickle that parses to the same description.
func FuzzParseMeta(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := torchwire.ParseMeta(p, false, torchwire.Limits{MaxDepth: 64, MaxNodes: 1 << 14})
		if err != nil {
			return
		}
		bcast := m.StorageDevice != ""
		q, err := m.Marshal(bcast)
		if err != nil {
			return
		}
		back, err := torchwire.ParseMeta(q, bcast, torchwire.Limits{})
		require.NoError(t, err)
		if !hasNaNMeta(&m.Root) {
			assert.Equal(t, m, back)
		}
	})
}

func hasNaNMeta(n *torchwire.Node) bool {
	for _, nt := range n.NonTensors {
		if hasNaN(nt.Value) {
			return true
		}
	}
	for _, c := range n.Children {
		if hasNaNMeta(c.Node) {
			return true
		}
	}
	return false
}
