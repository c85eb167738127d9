// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"flag"
	"math"
	"testing"

	"github.com/tdmpi/tdmpi/internal/bench"
)

// Ping-pong benchmarks between World ranks 0 and 1, reported by rank 0.
//
// go test picks b.N on each rank by itself, so the ranks cannot both run
// the benchmark loop as is. Rank 0 drives: for each run it sends rank 1 a
// control message (tag ctrlTag+size index, payload b.N) on ctrlComm, then
// times b.N round trips through this package and b.N round trips of the same
// loop written in C (package internal/bench) on the same buffer, interleaved in
// rounds, and the C loop again with MPI_Mprobe+MPI_Mrecv receives (which
// Recv uses; Cmprobe-us/1way). Figures are each loop's best round: ns/op is a Go round trip; the
// metrics give one-way latency and bandwidth of both, and go/C-bw the ratio
// of Go's bandwidth to C's (above 1: Go faster). Rank 1 serves those
// requests inside its first run of the same benchmark and returns, skipping,
// when the next control message is for another benchmark; TestMain sends a
// final message with tag ctrlEnd. Other ranks skip.

const (
	ctrlTag  = 1000
	ctrlEnd  = 1999
	pingTag  = 2000
	pingCTag = 2001
)

var ctrlComm *Comm

var pingSizes = []struct {
	name string
	n    int
}{
	{"8B", 8},
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
	{"16MiB", 16 << 20},
	{"256MiB", 256 << 20},
}

// benchSetup is called by TestMain on every rank after Init.
func benchSetup() error {
	var err error
	ctrlComm, err = World().Dup()
	return err
}

// benchTeardown is called by TestMain on every rank after m.Run.
func benchTeardown() error {
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" && World().Size() >= 2 {
		switch World().Rank() {
		case 0:
			if err := Send[int64](ctrlComm, nil, 1, ctrlEnd); err != nil {
				return err
			}
		case 1:
			if _, err := Recv[int64](ctrlComm, nil, 0, ctrlEnd); err != nil {
				return err
			}
		}
	}
	return ctrlComm.Free()
}

func BenchmarkPingPong(b *testing.B) {
	w := World()
	if w.Size() < 2 {
		b.Skip("needs 2 ranks (run under mpirun -np 2)")
	}
	for k, sz := range pingSizes {
		b.Run(sz.name, func(b *testing.B) {
			switch w.Rank() {
			case 0:
				pingDriver(b, k, sz.n)
			case 1:
				pingServer(b, k, sz.n)
			default:
				b.Skip("only World ranks 0 and 1 take part")
			}
		})
	}
}

// pingRounds splits iters round trips into up to 32 rounds; each round runs
// the Go loop and then the C loop, so that load changes on a busy machine
// hit both alike.
func pingRounds(iters int) []int {
	r := min(iters, 32)
	rounds := make([]int, r)
	for i := range rounds {
		rounds[i] = iters / r
	}
	rounds[0] += iters % r
	return rounds
}

// goPingPong runs iters round trips through this package.
func goPingPong(buf []byte, peer int, initiator bool, iters int) error {
	w := World()
	for range iters {
		if initiator {
			if err := Send(w, buf, peer, pingTag); err != nil {
				return err
			}
		}
		if _, err := Recv(w, buf, peer, pingTag); err != nil {
			return err
		}
		if !initiator {
			if err := Send(w, buf, peer, pingTag); err != nil {
				return err
			}
		}
	}
	return nil
}

// pingSession runs the three loops over iters round trips in rounds, after
// an untimed warm-up trip of each, rotating their order from round to round
// so that none always runs first. It returns each loop's best round, in
// seconds per round trip: on a shared machine the minimum is the least
// disturbed measurement. Both ranks call it with the same arguments.
func pingSession(buf []byte, peer int, initiator bool, iters int) (best [3]float64, err error) {
	for i := range buf {
		buf[i] = byte(i) // fault the pages in before timing
	}
	loops := [3]func(m int) (float64, error){
		func(m int) (float64, error) {
			t0 := Wtime()
			err := goPingPong(buf, peer, initiator, m)
			return Wtime() - t0, err
		},
		func(m int) (float64, error) { return bench.PingPong(buf, peer, initiator, m, pingCTag) },
		func(m int) (float64, error) { return bench.PingPongMprobe(buf, peer, initiator, m, pingCTag) },
	}
	for j := range loops {
		if _, err := loops[j](1); err != nil {
			return best, err
		}
		best[j] = math.Inf(1)
	}
	for i, m := range pingRounds(iters) {
		for j := range loops {
			l := (i + j) % len(loops)
			secs, err := loops[l](m)
			if err != nil {
				return best, err
			}
			best[l] = min(best[l], secs/float64(m))
		}
	}
	return best, nil
}

func pingDriver(b *testing.B, k, n int) {
	buf := make([]byte, n)
	iters := b.N
	if err := Send(ctrlComm, []int64{int64(iters)}, 1, ctrlTag+k); err != nil {
		b.Fatal(err)
	}
	best, err := pingSession(buf, 1, true, iters)
	if err != nil {
		b.Fatal(err)
	}
	goBest, cBest, mBest := best[0], best[1], best[2]
	b.ReportMetric(goBest*1e9, "ns/op") // a Go round trip
	b.ReportMetric(goBest/2*1e6, "go-us/1way")
	b.ReportMetric(cBest/2*1e6, "C-us/1way")
	b.ReportMetric(mBest/2*1e6, "Cmprobe-us/1way")
	b.ReportMetric(float64(2*n)/goBest/1e9, "go-GB/s")
	b.ReportMetric(float64(2*n)/cBest/1e9, "C-GB/s")
	b.ReportMetric(cBest/goBest, "go/C-bw")
}

func pingServer(b *testing.B, k, n int) {
	buf := make([]byte, n)
	for {
		st, err := Probe(ctrlComm, 0, AnyTag)
		if err != nil {
			b.Fatal(err)
		}
		if st.Tag != ctrlTag+k {
			break // rank 0 moved on; its next benchmark serves this message
		}
		req := make([]int64, 1)
		if _, err := Recv(ctrlComm, req, 0, st.Tag); err != nil {
			b.Fatal(err)
		}
		if _, err := pingSession(buf, 0, false, int(req[0])); err != nil {
			b.Fatal(err)
		}
	}
	b.Skipf("rank 1 serves rank 0's %s runs; figures are rank 0's", b.Name())
}
