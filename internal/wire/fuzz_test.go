// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"bytes"
	"testing"
)

// FuzzParseHeader checks that no input makes ParseFrame panic or accept a
// header beyond the default limits, and that what it accepts round-trips.
func FuzzParseHeader(f *testing.F) {
	h := validHeader()
	f.Add(Append(nil, &h))
	h2 := Header{Kind: KindSend}
	f.Add(AppendFrame(nil, &h2, "c", []byte("{}"), []byte{1, 2, 3, 4, 5, 6, 7, 8}))
	f.Fuzz(func(t *testing.T, msg []byte) {
		lim := DefaultLimits()
		if h, err := Parse(msg, lim); err == nil {
			if h.Total > lim.MaxTotal || h.MetaLen > lim.MaxMeta || h.ClassLen > lim.MaxClass || h.Total < 0 || h.MetaLen < 0 {
				t.Fatalf("accepted out-of-limit header %+v", h)
			}
			if re := Append(nil, &h); !bytes.Equal(re, msg[:Size]) {
				t.Fatalf("round trip differs:\n%x\n%x", re, msg[:Size])
			}
		}
		fr, err := ParseFrame(msg, lim)
		if err != nil {
			return
		}
		if int64(len(fr.Meta)) != fr.MetaLen || len(fr.Class) != fr.ClassLen {
			t.Fatalf("sections %d/%d do not match header %+v", len(fr.Meta), len(fr.Class), fr.Header)
		}
	})
}
