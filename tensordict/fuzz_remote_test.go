// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"runtime"
	"testing"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
)

// fuzzMaxBytes is the storage limit of FuzzInitFrame's receiver.
const fuzzMaxBytes = 256 << 10

// FuzzInitFrame feeds arbitrary bytes to the receiving side of InitRemote
// as the header message: the frame is parsed against the receiver's
// limits, the storage is allocated (inline, or as large as the header
// announces) and the TensorDict is built from the metadata, by the
// functions FromRemoteInit uses. No input may panic, and none may make the
// receiver allocate more than the storage limit plus a bounded multiple of
// the input's length.
func FuzzInitFrame(f *testing.F) {
	for _, td := range []*TensorDict{seedTD(f), seedMixed(f), seedNonTensor(f)} {
		frame, err := smallInitFrame("fuzz", td)
		if err != nil {
			f.Fatalf("seed frame: %v", err)
		}
		f.Add(frame)
		// The same metadata announcing a separate payload.
		sp, err := planSend("fuzz", td)
		if err != nil {
			f.Fatal(err)
		}
		h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Hash: signature(td), Leaves: int64(sp.leaves),
			Total: int64(sp.total), Chunk: wire.MaxChunk, PayloadTag: 1}
		f.Add(wire.AppendFrame(nil, &h, sp.class, sp.meta, nil))
		// A payload far over the limit, which must be refused before
		// anything is allocated.
		h.Total = 64 << 20
		f.Add(wire.AppendFrame(nil, &h, sp.class, sp.meta, nil))
	}
	l := &link{Link: xfer.Link{Op: "FromRemoteInit", Group: mpitest.Need(f, 1)}, o: resolve([]LimitOption{WithMaxBytes(fuzzMaxBytes)}, usesInitRecv)}
	var before, after runtime.MemStats
	f.Fuzz(func(t *testing.T, msg []byte) {
		frame := xfer.AlignedBuf(len(msg))
		// Everything the receiver allocated: the storage (at most the
		// limit) and the decoding, which grows with the metadata's length.
		limit := uint64(fuzzMaxBytes + 512*len(msg) + 64<<10)
		var td *TensorDict
		var err error
		// The count is the process's: other goroutines (the fuzzing
		// engine's, the receive pool's finalizers) may allocate at the
		// same time, as they did once in a fuzz run (475 KB during a
		// 24-byte frame that the header parser refused, 1 KB when run
		// again). An input is at fault only if every one of three tries
		// allocates over the bound.
		for try := 1; ; try++ {
			copy(frame, msg)
			runtime.ReadMemStats(&before)
			td, err = decodeInitFrame(l, frame)
			runtime.ReadMemStats(&after)
			got := after.TotalAlloc - before.TotalAlloc
			if got <= limit {
				break
			}
			if try == 3 {
				t.Fatalf("a %d-byte frame made the receiver allocate %d bytes (bound %d), three times", len(msg), got, limit)
			}
		}
		if err != nil {
			return
		}
		checkRebuilt(t, td)
	})
}

// smallInitFrame returns the single message of an InitRemote of the small
// td, as InitRemote sends it.
func smallInitFrame(op string, td *TensorDict) ([]byte, error) {
	s, err := p2pStateOf(op, td)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.initFrame(td, initRef{}, false)
}

// decodeInitFrame is what FromRemoteInit does with a received header
// frame before any payload arrives.
func decodeInitFrame(l *link, frame []byte) (*TensorDict, error) {
	fr, err := wire.ParseFrame(frame, l.o.limits())
	if err != nil {
		return nil, err
	}
	td, stor, finish, _, err := l.buildInit(&fr, false, nil, nil)
	if err != nil {
		return nil, err
	}
	if fr.Inline == nil {
		clear(stor.Bytes()) // what the payload would do
	}
	return td, finish(true)
}
