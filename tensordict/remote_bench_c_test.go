// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi && !mpich && linux

package tensordict

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/internal/bench"
	"github.com/tdmpi/tdmpi/internal/mem"
)

// BenchmarkRemoteInit256MiBvsC: InitRemote of 256 MiB into a new
// TensorDict each time (the previous result dropped), interleaved with the
// C baseline of issue 17: an MPI_Send/MPI_Recv ping-pong written in C
// (internal/bench) between two buffers that are reused, mapped as glibc's
// malloc maps a block this large (anonymous memory, no huge-page advice)
// and filled once. c/op is the C one-way time over ours: at least 1 means
// a fresh InitRemote moves at least the bandwidth of that C program.
func BenchmarkRemoteInit256MiBvsC(b *testing.B) {
	const n = 256 << 20
	g := benchGroup(b, 2)
	td := consolidatedTD(b, 8, n/8)
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(buf)
	filled(buf)
	peer := 1 - g.Rank()
	c := func() error {
		if g.Rank() > 1 {
			return nil
		}
		_, err := bench.PingPong(buf, peer, g.Rank() == 0, 1, 17017)
		return err
	}
	ours := oneWay(g, func(p int) error { return td.InitRemote(p) }, func(p int) error { _, err := FromRemoteInit(p); return err })
	pool0 := mem.Stats()
	cT, oursT := remoteCompare(b, g, c, ours)
	// One C round trip is two one-way transfers.
	b.ReportMetric(float64(cT)/2/float64(oursT), "c/op")
	b.ReportMetric(float64(n)*float64(b.N)/oursT.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(n)*float64(b.N)*2/cT.Seconds()/1e9, "c-GB/s")
	reportPool(b, pool0)
}
