// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
)

// The benchmarks of this file run on two ranks (or more, for the
// broadcast) and compare each operation with the raw MPI call moving the
// same bytes, measured in the same run, alternately. Ranks must agree on
// b.N, so they need a fixed iteration count:
//
//	go test -run XXX -bench Remote -benchtime 20x \
//	    -exec "mpirun -np 2 --bind-to none" ./tensordict/
//
// Each reports ns/op of the tdmpi operation and its ratio to the raw call:
// "raw/op" (raw time over tdmpi time: 1 means as fast as MPI; for
// throughput) or "x-raw" (tdmpi time over raw time; for latency).

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

// remoteWarmUp is how many times remoteCompare runs each function before
// measuring. Receivers that allocate a new storage each time need a few
// runs before the Go heap reaches its steady size: until then every
// receive lands in memory the process has never touched, which costs page
// faults (and, in a virtual machine, the host's faults as well: up to 10
// times the transfer itself for a 256 MiB receive on the machines of
// docs/bench.txt).
const remoteWarmUp = 4

// remoteCompare warms raw and ours up, then measures them alternately in
// five rounds that add up to b.N runs each, so that load changes on a
// shared machine hit both alike. The timer covers ours only. It returns
// for each the time of b.N runs at the median round's pace: a one-off
// event in one round, such as the new region the receive pool takes as a
// spare for a size once its requests twice waited for a collection
// (internal/mem; 0.5 s for 256 MiB of memory new to the process on this
// project's VM, which once made a 20-run figure 2.8x its steady value),
// does not make the figure.
func remoteCompare(b *testing.B, g *group.Group, raw, ours func() error) (rawT, oursT time.Duration) {
	b.Helper()
	for _, f := range []func() error{raw, ours} {
		for range remoteWarmUp {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	const rounds = 5
	var rawPace, oursPace []time.Duration
	for r := range rounds {
		m := b.N / rounds
		if r < b.N%rounds {
			m++
		}
		if m == 0 {
			continue
		}
		b.StopTimer()
		rawPace = append(rawPace, remoteTimed(b, g, m, raw)/time.Duration(m))
		b.StartTimer()
		oursPace = append(oursPace, remoteTimed(b, g, m, ours)/time.Duration(m))
	}
	return medianPace(rawPace) * time.Duration(b.N), medianPace(oursPace) * time.Duration(b.N)
}

// medianPace returns the median of ds (the mean of the middle two for an
// even count), which it sorts.
func medianPace(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2]
	}
	return (ds[n/2-1] + ds[n/2]) / 2
}

// remoteTimed runs f n times between barriers and returns the time taken.
func remoteTimed(b *testing.B, g *group.Group, n int, f func() error) time.Duration {
	b.Helper()
	if err := g.Barrier(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range n {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	if err := g.Barrier(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// pingPong returns a round trip between ranks 0 and 1 made of send and recv.
func pingPong(g *group.Group, send, recv func(peer int) error) func() error {
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

// oneWay returns a transfer from rank 0 to rank 1.
func oneWay(g *group.Group, send, recv func(peer int) error) func() error {
	return func() error {
		switch g.Rank() {
		case 0:
			return send(1)
		case 1:
			return recv(0)
		}
		return nil
	}
}

// consolidatedTD returns a consolidated TensorDict of leaves float64
// leaves of n bytes each.
func consolidatedTD(b *testing.B, leaves, n int) *TensorDict {
	td := New()
	for i := range leaves {
		if err := td.Set(K("x", fmt.Sprint(i)), tensor.Full(tensor.Float64, float64(i), n/8)); err != nil {
			b.Fatal(err)
		}
	}
	c, err := td.Consolidate()
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// bothRoots returns f run with root 0, then root 1: two broadcasts, the
// broadcast modes' counterpart of a round trip.
func bothRoots(f func(root int) error) func() error {
	return func() error {
		if err := f(0); err != nil {
			return err
		}
		return f(1)
	}
}

// rootAcked returns a function that runs bcast, a broadcast from rank 0,
// after which rank 1 tells rank 0 it is done (a raw message of 8 bytes):
// a broadcast from one root as a round trip. Rank 0 first works for work
// (a busy loop), while the others wait for its broadcast.
func rootAcked(g *group.Group, work time.Duration, bcast func() error) func() error {
	ack := make([]byte, 8)
	return func() error {
		if g.Rank() == 0 && work > 0 {
			for t0 := time.Now(); time.Since(t0) < work; {
			}
		}
		if err := bcast(); err != nil {
			return err
		}
		switch g.Rank() {
		case 0:
			return rawRecv(g, ack)(1)
		case 1:
			return rawSend(g, ack)(0)
		}
		return nil
	}
}

func rawSend(g *group.Group, buf []byte) func(int) error {
	return func(p int) error { return mpi.Send(proto.LibComm(g), buf, p, 1) }
}

func rawRecv(g *group.Group, buf []byte) func(int) error {
	return func(p int) error { _, err := mpi.Recv(proto.LibComm(g), buf, p, 1); return err }
}

// compareBoth measures ours against raw twice: with raw on Go heap
// buffers of n bytes in 4 KiB pages (reported as raw/op; what make gives
// where transparent huge pages are only used when asked for, the Debian
// default, unless the heap memory was advised before) and on huge-page
// buffers like a consolidated storage (raw-same/op). raw makes the raw
// operation over a buffer. It returns the time of ours in the first
// comparison.
func compareBoth(b *testing.B, g *group.Group, n int, raw func(buf []byte) func() error, ours func() error) time.Duration {
	b.Helper()
	rawT, oursT := remoteCompare(b, g, raw(filled(mem.NoHuge(make([]byte, n)))), ours)
	b.StopTimer()
	sameT, oursT2 := remoteCompare(b, g, raw(filled(mem.Huge(mem.Alloc(n)))), ours)
	b.ReportMetric(float64(rawT)/float64(oursT), "raw/op")
	b.ReportMetric(float64(sameT)/float64(oursT2), "raw-same/op")
	return oursT
}

// filled writes every byte of b and returns it. A buffer never written is
// backed by the kernel's shared zero page, which MPI reads far faster than
// real memory: an untouched baseline would not be a baseline.
func filled(b []byte) []byte {
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// rawOneWay is a raw one-way transfer of buf from rank 0 to rank 1.
func rawOneWay(g *group.Group) func([]byte) func() error {
	return func(buf []byte) func() error { return oneWay(g, rawSend(g, buf), rawRecv(g, buf)) }
}

// BenchmarkRemoteInit256MiB: InitRemote of a consolidated 256 MiB
// TensorDict of 8 leaves (the receiver allocates the storage each time)
// against mpi.Send of 256 MiB from a Go heap buffer into another, reused
// (raw/op). Consolidate's storage is a region of the receive pool, on
// huge pages (see internal/mem), which MPI moves faster; raw-same/op
// compares with mpi.Send between two such buffers, reused, to show what
// the protocol and the receiver's new storage cost.
func BenchmarkRemoteInit256MiB(b *testing.B) {
	const n = 256 << 20
	g := benchGroup(b, 2)
	td := consolidatedTD(b, 8, n/8)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	faults0 := ru.Minflt
	ours := oneWay(g, func(p int) error { return td.InitRemote(p) }, func(p int) error { _, err := FromRemoteInit(p); return err })
	pool0 := mem.Stats()
	oursT := compareBoth(b, g, n, rawOneWay(g), ours)
	b.ReportMetric(float64(n)*float64(b.N)/oursT.Seconds()/1e9, "GB/s")
	reportPool(b, pool0)
	// Page faults of this rank per operation (all measured loops), for
	// the receiver's storage: 65536 for a fresh buffer in 4 KiB pages.
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Minflt-faults0)/float64(4*b.N), "faults/op")
	}
}

// BenchmarkRemoteInit256MiBReuse is BenchmarkRemoteInit256MiB with a
// receiver that passes WithAllocator a recycler of the previous result's
// storage, off-heap huge pages (tensor.NewOffHeapStorage): no memory to
// find or fault in, and memory MPI moves faster.
func BenchmarkRemoteInit256MiBReuse(b *testing.B) {
	const n = 256 << 20
	g := benchGroup(b, 2)
	td := consolidatedTD(b, 8, n/8)
	var spare *tensor.Storage
	defer func() {
		if spare != nil {
			spare.Release()
		}
	}()
	reuse := WithAllocator(func(n int) (*tensor.Storage, error) {
		if spare != nil && spare.Len() == n {
			return spare, nil
		}
		return tensor.NewOffHeapStorage(n)
	})
	ours := oneWay(g, func(p int) error { return td.InitRemote(p) }, func(p int) error {
		got, err := FromRemoteInit(p, reuse)
		if err == nil {
			spare = got.ConsolidatedStorage()
		}
		return err
	})
	oursT := compareBoth(b, g, n, rawOneWay(g), ours)
	b.ReportMetric(float64(n)*float64(b.N)/oursT.Seconds()/1e9, "GB/s")
}

// latencyReps is how many round trips one iteration of a latency
// benchmark makes, so that the barriers between measured rounds (a few
// microseconds each) weigh nothing against the round trips even at
// -benchtime 20x.
const latencyReps = 500

// repeat returns f run n times.
func repeat(n int, f func() error) func() error {
	return func() error {
		for range n {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
}

// reportLatency reports the one-way times of ours and raw, each b.N
// iterations of latencyReps round trips, and their ratio.
func reportLatency(b *testing.B, rawT, ours time.Duration) {
	oneWays := float64(2 * latencyReps * b.N)
	b.ReportMetric(float64(ours)/float64(rawT), "x-raw")
	b.ReportMetric(float64(ours.Nanoseconds())/oneWays, "ns/one-way")
	b.ReportMetric(float64(rawT.Nanoseconds())/oneWays, "raw-ns/one-way")
}

// BenchmarkRemoteSeedLatency: one-way time of InitRemote/FromRemoteInit
// of the seed TensorDict (half a ping-pong) against an 8-byte mpi.Send.
// An iteration is latencyReps round trips.
func BenchmarkRemoteSeedLatency(b *testing.B) {
	g := benchGroup(b, 2)
	buf := make([]byte, 8)
	td := remoteSeedTD(b)
	rawT, ours := remoteCompare(b, g,
		repeat(latencyReps, pingPong(g, rawSend(g, buf), rawRecv(g, buf))),
		repeat(latencyReps, pingPong(g, func(p int) error { return td.InitRemote(p) },
			func(p int) error { _, err := FromRemoteInit(p); return err })))
	reportLatency(b, rawT, ours)
}

// BenchmarkRemoteHeaderCost: one-way time of a consolidated Send/Recv of
// the 32-byte seed TensorDict (header, then metadata with the storage)
// against a raw 32-byte message: what the header costs. An iteration is
// latencyReps round trips.
func BenchmarkRemoteHeaderCost(b *testing.B) {
	g := benchGroup(b, 2)
	buf := make([]byte, 32)
	td, err := remoteSeedTD(b).Consolidate()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	rawT, ours := remoteCompare(b, g,
		repeat(latencyReps, pingPong(g, rawSend(g, buf), rawRecv(g, buf))),
		repeat(latencyReps, pingPong(g, func(p int) error { return td.Send(p, WithConsolidated()) },
			func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err })))
	reportLatency(b, rawT, ours)
}

// BenchmarkRemoteSendRecvConsolidated16MiB: consolidated Send/Recv of a
// 16 MiB TensorDict of 4 leaves (ping-pong) against raw 16 MiB messages
// between Go heap buffers (raw/op) and between huge-page buffers like the
// TensorDict's consolidated storage (raw-same/op).
func BenchmarkRemoteSendRecvConsolidated16MiB(b *testing.B) {
	const n = 16 << 20
	g := benchGroup(b, 2)
	td := consolidatedTD(b, 4, n/4)
	b.ReportAllocs()
	ours := pingPong(g, func(p int) error { return td.Send(p, WithConsolidated()) },
		func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err })
	compareBoth(b, g, n, func(buf []byte) func() error { return pingPong(g, rawSend(g, buf), rawRecv(g, buf)) }, ours)
}

// BenchmarkRemoteBroadcast64MiB: InitRemote with WithBroadcast of a
// consolidated 64 MiB TensorDict (the receivers build a new result each
// time and drop the previous one) against mpi.Bcast of 64 MiB from and
// into Go heap buffers (raw/op) and huge-page buffers like the sender's
// consolidated storage (raw-same/op).
func BenchmarkRemoteBroadcast64MiB(b *testing.B) { benchRemoteBroadcast(b, 64<<20) }

// BenchmarkRemoteBroadcast256MiB is BenchmarkRemoteBroadcast64MiB with
// 256 MiB.
func BenchmarkRemoteBroadcast256MiB(b *testing.B) { benchRemoteBroadcast(b, 256<<20) }

func benchRemoteBroadcast(b *testing.B, n int) {
	g := benchGroup(b, 2)
	td := consolidatedTD(b, 4, n/4)
	ours := func() error {
		if g.Rank() == 0 {
			return td.InitRemote(0, WithBroadcast())
		}
		_, err := FromRemoteInit(0, WithBroadcast())
		return err
	}
	pool0 := mem.Stats()
	oursT := compareBoth(b, g, n, func(buf []byte) func() error { return func() error { return mpi.Bcast(proto.LibComm(g), buf, 0) } }, ours)
	b.ReportMetric(float64(n)*float64(b.N)/oursT.Seconds()/1e9, "GB/s")
	reportPool(b, pool0)
}

// reportPool reports, on the receiving rank, the share of receives since
// the receive pool's counters were s0 that it served with memory that came
// back (pool-reused) rather than new memory. compareBoth runs ours twice
// b.N times.
func reportPool(b *testing.B, s0 mem.PoolStats) {
	s := mem.Stats()
	if got := s.Fresh + s.Reused - s0.Fresh - s0.Reused; got > 0 {
		b.ReportMetric(float64(s.Reused-s0.Reused)/float64(got), "pool-reused")
		b.ReportMetric(float64(s.NudgeNs-s0.NudgeNs)/1e6/float64(got), "nudge-ms/op")
	}
}

// BenchmarkRemoteSendContext16MiB: consolidated Send/Recv of a 16 MiB
// TensorDict (ping-pong) whose Sends are bounded by a context, which makes
// them nonblocking sends polled against it, against the same transfer
// without a context, blocking sends (blocking/op: 1 means the context
// costs nothing).
func BenchmarkRemoteSendContext16MiB(b *testing.B) {
	const n = 16 << 20
	g := benchGroup(b, 2)
	td := consolidatedTD(b, 4, n/4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recv := func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err }
	blocking := pingPong(g, func(p int) error { return td.Send(p, WithConsolidated()) }, recv)
	ours := pingPong(g, func(p int) error { return td.Send(p, WithConsolidated(), WithContext(ctx)) }, recv)
	rawT, oursT := remoteCompare(b, g, blocking, ours)
	b.ReportMetric(float64(rawT)/float64(oursT), "blocking/op")
}

// BenchmarkRemoteSmall16: the small transfers of issue 17, a TensorDict of
// 16 float64 leaves of 64 bytes (1 KiB in all), one way (half a ping-pong),
// against a raw message of the same 1 KiB (x-raw; for per-leaf, 16 raw
// messages of 64 bytes). An iteration is latencyReps round trips.
// InitRemoteEcho sends on the TensorDict each rank received last, a new
// one every time, as tdmpi bench's initremote does. InitRemoteBroadcast
// is InitRemote with WithBroadcast from rank 0, then from rank 1, against
// mpi.Bcast of the same 1 KiB (ranks past 1 receive both).
func BenchmarkRemoteSmall16(b *testing.B) { benchRemoteLeaves(b, 16, 64) }

// BenchmarkRemote6KiB16 is BenchmarkRemoteSmall16 with leaves of 384
// bytes (6 KiB in all): past Open MPI's eager limit, and within the size
// InitRemote and consolidated Send send in the header message in two
// blocks (xfer.EagerSendMax).
func BenchmarkRemote6KiB16(b *testing.B) { benchRemoteLeaves(b, 16, 384) }

// BenchmarkRemoteMid16 is BenchmarkRemoteSmall16 with leaves of 1 KiB
// (16 KiB in all), past the eager limit (xfer.EagerSendMax) and splitRecvMin.
func BenchmarkRemoteMid16(b *testing.B) { benchRemoteLeaves(b, 16, 1024) }

// BenchmarkRemoteLarge16 is BenchmarkRemoteSmall16 with leaves of 4 KiB
// (64 KiB in all).
func BenchmarkRemoteLarge16(b *testing.B) { benchRemoteLeaves(b, 16, 4096) }

// BenchmarkRemote256KiB16 is BenchmarkRemoteSmall16 with leaves of 16
// KiB (256 KiB in all): InitRemote's storage follows its header in a
// message of its own.
func BenchmarkRemote256KiB16(b *testing.B) { benchRemoteLeaves(b, 16, 16<<10) }

func benchRemoteLeaves(b *testing.B, leaves, n int) {
	g := benchGroup(b, 2)
	td := consolidatedTD(b, leaves, n)
	whole := filled(make([]byte, leaves*n))
	parts := make([][]byte, leaves)
	for i := range parts {
		parts[i] = filled(make([]byte, n))
	}
	rawParts := func(p int, f func([]byte) func(int) error) error {
		for _, q := range parts {
			if err := f(q)(p); err != nil {
				return err
			}
		}
		return nil
	}
	last := td // InitRemoteEcho: each rank sends on what it received last
	rawBcast := func() error { return mpi.Bcast(proto.LibComm(g), whole, 0) }
	bcastMode := func() error {
		if g.Rank() == 0 {
			return td.InitRemote(0, WithBroadcast())
		}
		_, err := FromRemoteInit(0, WithBroadcast())
		return err
	}
	const rootWork = 5 * time.Microsecond
	for _, c := range []struct {
		name      string
		raw, ours func() error
		pause     time.Duration // rank 0's work before each round trip, left out of the times
	}{
		{name: "InitRemote", raw: pingPong(g, rawSend(g, whole), rawRecv(g, whole)),
			ours: pingPong(g, func(p int) error { return td.InitRemote(p) },
				func(p int) error { _, err := FromRemoteInit(p); return err })},
		{name: "InitRemoteEcho", raw: pingPong(g, rawSend(g, whole), rawRecv(g, whole)),
			ours: pingPong(g, func(p int) error { return last.InitRemote(p) },
				func(p int) error { got, err := FromRemoteInit(p); last = got; return err })},
		{name: "InitRemoteBroadcast", raw: bothRoots(func(root int) error { return mpi.Bcast(proto.LibComm(g), whole, root) }),
			ours: bothRoots(func(root int) error {
				if g.Rank() == root {
					return td.InitRemote(root, WithBroadcast())
				}
				_, err := FromRemoteInit(root, WithBroadcast())
				return err
			})},
		{name: "InitRemoteBroadcastAck", raw: rootAcked(g, 0, rawBcast), ours: rootAcked(g, 0, bcastMode)},
		{name: "InitRemoteBroadcastIdle", raw: rootAcked(g, rootWork, rawBcast), ours: rootAcked(g, rootWork, bcastMode), pause: rootWork},
		{name: "SendConsolidated", raw: pingPong(g, rawSend(g, whole), rawRecv(g, whole)),
			ours: pingPong(g, func(p int) error { return td.Send(p, WithConsolidated()) },
				func(p int) error { _, err := td.Recv(p, WithConsolidated()); return err })},
		{name: "SendLeaves", raw: pingPong(g, func(p int) error { return rawParts(p, func(q []byte) func(int) error { return rawSend(g, q) }) },
			func(p int) error { return rawParts(p, func(q []byte) func(int) error { return rawRecv(g, q) }) }),
			ours: pingPong(g, func(p int) error { return td.Send(p) },
				func(p int) error { _, err := td.Recv(p); return err })},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			rawT, ours := remoteCompare(b, g, repeat(latencyReps, c.raw), repeat(latencyReps, c.ours))
			paused := time.Duration(b.N*latencyReps) * c.pause
			reportLatency(b, rawT-paused, ours-paused)
		})
	}
}
