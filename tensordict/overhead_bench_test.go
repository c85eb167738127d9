// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"testing"
)

// BenchmarkRemoteOverhead times the Go work a small transfer adds on its
// two sides: a ping-pong between ranks 0 and 1 of Send and Recv against
// mpi.Send and mpi.Recv of the same bytes (x-raw, ns/one-way and
// raw-ns/one-way as reportLatency; over-ns/one-way is the difference).
// The TensorDicts hold 16 leaves of 8 bytes (frames of 192 bytes) or 32
// bytes (576), sent with WithConsolidated (one message) or per leaf (17
// messages, against 16 raw ones). An iteration is latencyReps round
// trips. Run it under mpirun -np 2 with -benchtime Nx (see
// remote_bench_test.go); on a shared machine the other rank's scheduling
// makes the difference noisy, so compare runs alternately.
func BenchmarkRemoteOverhead(b *testing.B) {
	g := benchGroup(b, 2)
	for _, n := range []int{8, 32} {
		td := consolidatedTD(b, 16, n)
		whole := filled(make([]byte, 16*n))
		parts := make([][]byte, 16)
		for i := range parts {
			parts[i] = filled(make([]byte, n))
		}
		eachPart := func(f func([]byte) func(int) error) func(int) error {
			return func(p int) error {
				for _, q := range parts {
					if err := f(q)(p); err != nil {
						return err
					}
				}
				return nil
			}
		}
		for _, c := range []struct {
			name      string
			raw, ours func() error
		}{
			{"Consolidated",
				pingPong(g, rawSend(g, whole), rawRecv(g, whole)),
				pingPong(g, func(p int) error { return td.Send(p, WithConsolidated()) },
					func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err })},
			{"Leaves",
				pingPong(g, eachPart(func(q []byte) func(int) error { return rawSend(g, q) }),
					eachPart(func(q []byte) func(int) error { return rawRecv(g, q) })),
				pingPong(g, func(p int) error { return td.Send(p) },
					func(p int) error { _, err := td.Recv(p); return err })},
		} {
			b.Run(fmt.Sprintf("%s/%dB", c.name, 16*n), func(b *testing.B) {
				b.ReportAllocs()
				rawT, oursT := remoteCompare(b, g, repeat(latencyReps, c.raw), repeat(latencyReps, c.ours))
				reportLatency(b, rawT, oursT)
				oneWays := float64(2 * latencyReps * b.N)
				b.ReportMetric(float64((oursT-rawT).Nanoseconds())/oneWays, "over-ns/one-way")
			})
		}
	}
}
