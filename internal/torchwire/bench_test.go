// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire_test

import (
	"bytes"
	"testing"

	ogorek "github.com/kisielk/og-rek"

	"github.com/tdmpi/tdmpi/internal/torchwire"
)

// widePickle returns the 76 KB metadata pickle of case wide (125 leaves).
func widePickle(b *testing.B) []byte {
	for _, c := range loadCases(b) {
		if c.Name == "wide" {
			return c.Modes["p2p"].Payload[1]
		}
	}
	b.Fatal("no case wide")
	return nil
}

// BenchmarkParseMetaWide: the restricted decoder and the description of
// case wide, beside og-rek decoding the same pickle (no description).
func BenchmarkParseMetaWide(b *testing.B) {
	p := widePickle(b)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := torchwire.ParseMeta(p, false, torchwire.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOgorekWide(b *testing.B) {
	p := widePickle(b)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := ogorek.NewDecoder(bytes.NewReader(p)).Decode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalWide(b *testing.B) {
	m, err := torchwire.ParseMeta(widePickle(b), false, torchwire.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Marshal(false); err != nil {
			b.Fatal(err)
		}
	}
}
