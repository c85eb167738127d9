// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"os"
	"runtime"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/internal/log"
)

// Go sets GOMAXPROCS to the CPUs a process may run on. Ranks started
// without binding (mpirun --bind-to none, MPICH's mpiexec by default) may
// each run on every CPU of the node, so n such ranks run n times as many
// Go processors as there are CPUs: the collector's workers and the rank's
// other goroutines then contend for the cores with the ranks' polling
// threads, and the kernel's time slices stall a small transfer for a
// millisecond at a time. Init therefore gives each such rank its share of
// the node's CPUs (shareProcs), as a rank bound to its cores gets by
// itself. On the 2-core VM of this project, with two unbound ranks, a
// fresh InitRemote of 16 small leaves took 2.0-2.6 us one way with
// GOMAXPROCS=1 against 2.9-3.5 us with 2 (three alternating runs), and
// transfers of 256 MiB moved at the same speed either way.

// shareProcs lowers GOMAXPROCS to this rank's share of the node's CPUs
// when the ranks of the job on the node (env.LocalSize) are not bound to
// CPUs of their own, as procsShare decides, and logs it.
func shareProcs(env hpc.Env) {
	_, explicit := os.LookupEnv("GOMAXPROCS")
	cur := runtime.GOMAXPROCS(0)
	online, _ := hpc.OnlineCPUs()
	n := procsShare(cur, runtime.NumCPU(), online, env.LocalSize, explicit)
	if n == cur {
		return
	}
	runtime.GOMAXPROCS(n)
	log.Logger().Info().Int("from", cur).Int("to", n).Int("local_ranks", env.LocalSize).Int("cpus", online).
		Msg("group: Init: GOMAXPROCS lowered to this rank's share of the node's CPUs (set GOMAXPROCS, or use WithAllProcs, to keep it)")
}

// procsShare returns the GOMAXPROCS of a rank that runs cur Go processors
// on numCPU CPUs (its affinity mask, runtime.NumCPU) of a node with online
// CPUs, among local ranks of its job on the node: cur itself when the user
// set GOMAXPROCS (explicit), when the rank is alone on the node or its
// count is unknown (local < 2), or when the rank is bound to some of the
// CPUs (numCPU < online: the launcher gave each rank CPUs of its own, and
// Go already counts only those); otherwise numCPU/local, at least 1 and
// never more than cur.
func procsShare(cur, numCPU, online, local int, explicit bool) int {
	if explicit || local < 2 || online < 1 || numCPU != online {
		return cur
	}
	return max(1, min(cur, numCPU/local))
}
