// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"math/bits"
	"os"
	"runtime"
	"slices"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/mpi"
)

// Go sets GOMAXPROCS to the CPUs a process may run on. Ranks that share
// CPUs run more Go processors than those CPUs: n unbound ranks
// (mpirun --bind-to none, MPICH's mpiexec by default) n times as many as
// the node has, and Open MPI's default binding from three ranks up (to a
// socket or NUMA domain) as many times as ranks share a domain. The
// collector's workers and the rank's other goroutines then contend for the
// cores with the ranks' polling threads, and the kernel's time slices
// stall a small transfer for a millisecond at a time. Init therefore gives
// each rank its fair share of the CPUs it may run on (shareProcs), as a
// rank bound to cores of its own gets by itself. On the 2-core VM of this
// project, with two unbound ranks, a fresh InitRemote of 16 small leaves
// took 2.0-2.6 us one way with GOMAXPROCS=1 against 2.9-3.5 us with 2
// (three alternating runs), and transfers of 256 MiB moved at the same
// speed either way.

// shareProcs lowers GOMAXPROCS to this rank's fair share of the CPUs it
// may run on (fairShare), among the ranks of w on its node, unless keep
// (WithAllProcs) or the user set GOMAXPROCS; it logs the change. Every
// rank of w takes part in the exchange of affinity masks all the same, so
// that all make the same collective calls: a rank that skipped them would
// leave the others waiting. An exchange that fails changes nothing.
//
// With torch peers (torch), whose initialisation makes no such call, there
// is no exchange: each rank assumes the env.LocalSize ranks of the job on
// its node (Go's and torch's) run on the same CPUs as itself when it may
// run on every online CPU (unbound), and on CPUs of their own otherwise
// (assumedMasks).
//
// It records the world ranks of this node that the exchange found, for
// SameNode.
func shareProcs(w *mpi.Comm, env hpc.Env, keep, torch bool) {
	var masks [][]uint64
	var me int
	var err error
	if torch {
		masks, err = assumedMasks(env.LocalSize)
	} else {
		var local []int
		masks, me, local, err = nodeMasks(w)
		if err == nil {
			slices.Sort(local) // in w's order already: SplitShared keys by rank
			nodeRanks.Store(&local)
		}
	}
	if err != nil {
		log.Logger().Warn().Err(err).Msg("group: Init: GOMAXPROCS left as it is: the CPUs of this node's ranks are unknown")
		return
	}
	_, explicit := os.LookupEnv("GOMAXPROCS")
	if keep || explicit {
		return
	}
	cur := runtime.GOMAXPROCS(0)
	n := procsShare(cur, fairShare(masks, me))
	if n == cur {
		return
	}
	runtime.GOMAXPROCS(n)
	log.Logger().Info().Int("from", cur).Int("to", n).Int("local_ranks", len(masks)).Int("cpus", cpuCount(masks[me])).
		Msg("group: Init: GOMAXPROCS lowered to this rank's share of its CPUs (set GOMAXPROCS, or use WithAllProcs, to keep it)")
}

// nodeMasks returns the affinity masks (hpc.AffinityMask) of the ranks of
// w on this node (mpi.Comm.SplitShared), in their order in w, the index
// of this rank's, and the ranks in w of those processes, in increasing
// order. It is collective over w. A rank whose mask is unknown sends an
// empty one.
func nodeMasks(w *mpi.Comm) (masks [][]uint64, me int, ranks []int, err error) {
	mine, merr := hpc.AffinityMask()
	if merr != nil || len(mine) > maskWords {
		mine = nil
	}
	local, err := w.SplitShared()
	if err != nil {
		return nil, 0, nil, err
	}
	send := make([]uint64, maskWords)
	copy(send, mine)
	n := local.Size()
	all := make([]uint64, maskWords*n)
	err = mpi.Allgather(local, send, all)
	me = local.Rank()
	ranks = make([]int, n)
	for i := range ranks {
		if err != nil {
			break
		}
		ranks[i], err = local.TranslateRank(i, w)
	}
	if ferr := local.Free(); err == nil {
		err = ferr
	}
	if err != nil {
		return nil, 0, nil, err
	}
	masks = make([][]uint64, n)
	for i := range masks {
		masks[i] = all[i*maskWords : (i+1)*maskWords]
	}
	return masks, me, ranks, nil
}

// assumedMasks returns the masks shareProcs assumes, this rank's first,
// for local ranks of the job on this node: local copies of this rank's
// mask when it holds every online CPU, else only its own.
func assumedMasks(local int) ([][]uint64, error) {
	mine, err := hpc.AffinityMask()
	if err != nil {
		return nil, err
	}
	online, err := hpc.OnlineCPUs()
	if err != nil {
		return nil, err
	}
	masks := [][]uint64{mine}
	if cpuCount(mine) == online {
		for len(masks) < local {
			masks = append(masks, mine)
		}
	}
	return masks, nil
}

// maskWords is the length of the masks nodeMasks exchanges: 1024 CPUs,
// Linux's default CPU set.
const maskWords = 16

// fairShare returns the CPUs of masks[me] shared out among the ranks
// whose masks hold each: the sum over those CPUs of one over the number of
// ranks that may run on it, rounded down, at least 1 (0 for an empty
// mask: unknown). Ranks bound to CPUs of their own get them all; n ranks
// that share the same CPUs (unbound, or bound to one socket) get 1/n of
// them each.
func fairShare(masks [][]uint64, me int) int {
	if cpuCount(masks[me]) == 0 {
		return 0
	}
	var share float64
	for w, word := range masks[me] {
		for word != 0 {
			bit := uint64(1) << bits.TrailingZeros64(word)
			word &^= bit
			n := 0
			for _, m := range masks {
				if w < len(m) && m[w]&bit != 0 {
					n++
				}
			}
			share += 1 / float64(n)
		}
	}
	return max(1, int(share+1e-9))
}

// cpuCount returns the number of CPUs in mask.
func cpuCount(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}

// procsShare returns the GOMAXPROCS of a rank that runs cur Go processors
// and whose fair share of its CPUs is share: share, never more than cur;
// cur when share is unknown (0).
func procsShare(cur, share int) int {
	if share < 1 {
		return cur
	}
	return min(cur, share)
}
