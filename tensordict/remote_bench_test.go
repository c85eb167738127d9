// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// The benchmarks of this file run on two ranks (or more, for the
// broadcast) and compare each operation with the raw MPI call moving the
// same bytes, measured in the same run. Ranks must agree on b.N, so they
// need a fixed iteration count:
//
//	go test -run XXX -bench Remote -benchtime 20x \
//	    -exec "mpirun -np 2 --bind-to none" ./tensordict/
//
// Each reports ns/op of the tdmpi operation and the ratio to the raw call:
// "raw/op" (raw time over tdmpi time: 1 means as fast as MPI) or
// "x-raw" (tdmpi time over raw time, for latencies).

// benchGroup returns the world if it has at least n ranks and b.N is
// fixed, else skips.
func benchGroup(b *testing.B, n int) *group.Group {
	g := group.World()
	if g == nil || g.Size() < n {
		b.Skipf("needs %d ranks under mpirun", n)
	}
	if f := flag.Lookup("test.benchtime"); f == nil || !strings.HasSuffix(f.Value.String(), "x") {
		b.Skip("run with -benchtime Nx so that every rank runs the same b.N")
	}
	return g
}

// remoteTimed runs f once to warm up, then b.N times between barriers,
// and returns the elapsed time of the b.N runs.
func remoteTimed(b *testing.B, g *group.Group, f func() error) time.Duration {
	b.Helper()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	if err := g.Barrier(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range b.N {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	if err := g.Barrier(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func BenchmarkRemoteInit256MiB(b *testing.B) {
	g := benchGroup(b, 2)
	const leaves, n = 8, 32 << 20 / 4 // 8 leaves of 32 MiB
	raw := make([]byte, 256<<20)
	c := g.LibComm()
	rawT := remoteTimed(b, g, func() error {
		switch g.Rank() {
		case 0:
			return mpi.Send(c, raw, 1, 1)
		case 1:
			_, err := mpi.Recv(c, raw, 0, 1)
			return err
		}
		return nil
	})
	var td *TensorDict
	if g.Rank() == 0 {
		td = New()
		for i := range leaves {
			td.Set(K("l", string(rune('a'+i))), tensor.Full(tensor.Float32, float64(i), n))
		}
		var err error
		if td, err = td.Consolidate(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	ours := remoteTimed(b, g, func() error {
		switch g.Rank() {
		case 0:
			return td.InitRemote(1)
		case 1:
			_, err := FromRemoteInit(0)
			return err
		}
		return nil
	})
	b.ReportMetric(float64(rawT)/float64(ours), "raw/op")
	b.ReportMetric(float64(256<<20)/ours.Seconds()*float64(b.N)/1e9, "GB/s")
}

func BenchmarkRemoteSeedLatency(b *testing.B) {
	g := benchGroup(b, 2)
	c := g.LibComm()
	msg := make([]byte, 8)
	// Ping-pong: one way is half a round trip.
	rawT := remoteTimed(b, g, func() error {
		switch g.Rank() {
		case 0:
			if err := mpi.Send(c, msg, 1, 1); err != nil {
				return err
			}
			_, err := mpi.Recv(c, msg, 1, 1)
			return err
		case 1:
			if _, err := mpi.Recv(c, msg, 0, 1); err != nil {
				return err
			}
			return mpi.Send(c, msg, 0, 1)
		}
		return nil
	})
	td := remoteSeedTD(b)
	b.ResetTimer()
	ours := remoteTimed(b, g, func() error {
		switch g.Rank() {
		case 0:
			if err := td.InitRemote(1); err != nil {
				return err
			}
			_, err := FromRemoteInit(1)
			return err
		case 1:
			got, err := FromRemoteInit(0)
			if err != nil {
				return err
			}
			return got.InitRemote(0)
		}
		return nil
	})
	b.ReportMetric(float64(ours)/float64(rawT), "x-raw")
	b.ReportMetric(float64(ours.Nanoseconds())/float64(2*b.N), "ns/one-way")
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(2*b.N), "raw-ns/one-way")
}

func BenchmarkRemoteSendRecvConsolidated16MiB(b *testing.B) {
	g := benchGroup(b, 2)
	c := g.LibComm()
	raw := make([]byte, 16<<20)
	pingPong := func(send func(int) error, recv func(int) error) func() error {
		return func() error {
			switch g.Rank() {
			case 0:
				if err := send(1); err != nil {
					return err
				}
				return recv(1)
			case 1:
				if err := recv(0); err != nil {
					return err
				}
				return send(0)
			}
			return nil
		}
	}
	rawT := remoteTimed(b, g, pingPong(
		func(p int) error { return mpi.Send(c, raw, p, 1) },
		func(p int) error { _, err := mpi.Recv(c, raw, p, 1); return err }))
	td, err := New().Consolidate()
	if err != nil {
		b.Fatal(err)
	}
	src := New()
	for i := range 4 {
		src.Set(K("x", string(rune('a'+i))), tensor.Full(tensor.Float64, 1, 4<<20/8))
	}
	if td, err = src.Consolidate(); err != nil {
		b.Fatal(err)
	}
	// Warm the cached encodings before measuring.
	if err := pingPong(
		func(p int) error { return td.Send(p, WithConsolidated()) },
		func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err })(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	ours := remoteTimed(b, g, pingPong(
		func(p int) error { return td.Send(p, WithConsolidated()) },
		func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err }))
	b.ReportMetric(float64(rawT)/float64(ours), "raw/op")
}

func BenchmarkRemoteBroadcast64MiB(b *testing.B) {
	g := benchGroup(b, 2)
	c := g.LibComm()
	raw := make([]byte, 64<<20)
	rawT := remoteTimed(b, g, func() error { return mpi.Bcast(c, raw, 0) })
	var td *TensorDict
	if g.Rank() == 0 {
		td = New()
		for i := range 4 {
			td.Set(K("x", string(rune('a'+i))), tensor.Full(tensor.Float64, 1, 16<<20/8))
		}
		var err error
		if td, err = td.Consolidate(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	ours := remoteTimed(b, g, func() error {
		if g.Rank() == 0 {
			return td.InitRemote(0, WithBroadcast())
		}
		_, err := FromRemoteInit(0, WithBroadcast())
		return err
	})
	b.ReportMetric(float64(rawT)/float64(ours), "raw/op")
}

// BenchmarkRemoteHeaderCost measures what the header and metadata messages
// of Send cost: a consolidated Send/Recv ping-pong of the 32-byte seed
// TensorDict against a raw ping-pong of the same 32 bytes.
func BenchmarkRemoteHeaderCost(b *testing.B) {
	g := benchGroup(b, 2)
	c := g.LibComm()
	raw := make([]byte, 32)
	pingPong := func(send func(int) error, recv func(int) error) func() error {
		return func() error {
			switch g.Rank() {
			case 0:
				if err := send(1); err != nil {
					return err
				}
				return recv(1)
			case 1:
				if err := recv(0); err != nil {
					return err
				}
				return send(0)
			}
			return nil
		}
	}
	rawT := remoteTimed(b, g, pingPong(
		func(p int) error { return mpi.Send(c, raw, p, 1) },
		func(p int) error { _, err := mpi.Recv(c, raw, p, 1); return err }))
	td, err := remoteSeedTD(b).Consolidate()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	ours := remoteTimed(b, g, pingPong(
		func(p int) error { return td.Send(p, WithConsolidated()) },
		func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err }))
	b.ReportMetric(float64(ours)/float64(rawT), "x-raw")
	b.ReportMetric(float64(ours.Nanoseconds())/float64(2*b.N), "ns/one-way")
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(2*b.N), "raw-ns/one-way")
}
