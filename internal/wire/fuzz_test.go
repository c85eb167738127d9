// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wire

import (
	"bytes"
	"reflect"
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
		// A message split anywhere parses in two parts only as a whole
		// (and then the same).
		if len(msg) > 0 {
			at := int(msg[0]) % (len(msg) + 1)
			if sf, ok := ParseSplitFrame(msg[:at:at], msg[at:], lim); ok {
				if fr, err := ParseFrame(msg, lim); err != nil || !reflect.DeepEqual(sf, fr) {
					t.Fatalf("split at %d parses (%+v) but the whole does not the same: %v, %+v", at, sf, err, fr)
				}
			}
		}
		fr, err := ParseFrame(msg, lim)
		if err != nil {
			return
		}
		if int64(len(fr.Meta)) != fr.MetaLen || len(fr.Class) != fr.ClassLen {
			t.Fatalf("sections %d/%d do not match header %+v", len(fr.Meta), len(fr.Class), fr.Header)
		}
		// Received in two parts, the storage apart, it parses the same.
		if fr.Inline != nil {
			at := len(msg) - len(fr.Inline)
			sf, ok := ParseSplitFrame(msg[:at:at], msg[at:], lim)
			if !ok || !reflect.DeepEqual(sf, fr) {
				t.Fatalf("split at %d: ok %v, frame %+v, want %+v", at, ok, sf, fr)
			}
		}
	})
}
