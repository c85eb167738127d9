// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

// BenchmarkRemoteOverhead times, in one process, a small transfer sent to
// the process itself and received back, against mpi.Send and mpi.Recv of
// the same bytes to itself (raw-ns/op; x-raw is the ratio and over-ns/op
// the difference): the Go work that a transfer adds on its two sides,
// without a second process, whose scheduling makes a ping-pong on a
// shared machine too noisy to resolve 10 ns. The TensorDicts hold 16
// leaves of 8 bytes (frames of 192 bytes) or 32 bytes (576), sent with
// WithConsolidated (one message) or per leaf (17 messages, against 16 raw
// ones). Both stay under the eager limit of a message to self (Open
// MPI: 1 KiB with its headers): a blocking
// transfer to self past it would deadlock.
func BenchmarkRemoteOverhead(b *testing.B) {
	g := group.World()
	if g == nil {
		b.Skip("needs MPI (run under mpirun, or as a singleton)")
	}
	testHookSelf = true
	defer func() { testHookSelf = false }()
	me := g.Rank()
	for _, n := range []int{8, 32} {
		td := consolidatedTD(b, 16, n)
		whole := filled(make([]byte, 16*n))
		parts := make([][]byte, 16)
		for i := range parts {
			parts[i] = filled(make([]byte, n))
		}
		for _, c := range []struct {
			name      string
			raw, ours func() error
		}{
			{"Consolidated", func() error {
				if err := mpi.Send(proto.LibComm(g), whole, me, 1); err != nil {
					return err
				}
				_, err := mpi.Recv(proto.LibComm(g), whole, me, 1)
				return err
			}, func() error {
				if err := td.Send(me, WithConsolidated()); err != nil {
					return err
				}
				_, err := td.Recv(me, WithConsolidated())
				return err
			}},
			{"Leaves", func() error {
				for _, q := range parts {
					if err := mpi.Send(proto.LibComm(g), q, me, 1); err != nil {
						return err
					}
				}
				for _, q := range parts {
					if _, err := mpi.Recv(proto.LibComm(g), q, me, 1); err != nil {
						return err
					}
				}
				return nil
			}, func() error {
				if err := td.Send(me); err != nil {
					return err
				}
				_, err := td.Recv(me)
				return err
			}},
		} {
			b.Run(fmt.Sprintf("%s/%dB", c.name, 16*n), func(b *testing.B) {
				b.ReportAllocs()
				// Alternate halves, so that drift hits both alike.
				var rawT, oursT float64
				for half := range 2 {
					n := (b.N + 1 - half) / 2
					for _, f := range []func() error{c.raw, c.ours} {
						if err := f(); err != nil { // warm up: first transfer, buffers
							b.Fatal(err)
						}
					}
					rawT += timeLoop(b, n, c.raw)
					oursT += timeLoop(b, n, c.ours)
				}
				b.ReportMetric(oursT/float64(b.N), "ns/op")
				b.ReportMetric(rawT/float64(b.N), "raw-ns/op")
				b.ReportMetric(oursT/rawT, "x-raw")
				b.ReportMetric((oursT-rawT)/float64(b.N), "over-ns/op")
			})
		}
	}
}

// timeLoop returns the nanoseconds n calls of f take.
func timeLoop(b *testing.B, n int, f func() error) float64 {
	start := time.Now()
	for range n {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Nanoseconds())
}
