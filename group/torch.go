// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tdmpi/tdmpi/mpi"
)

// TorchOption configures WithTorchPeers.
type TorchOption func(*torchConfig)

type torchConfig struct {
	barrier    *bool // nil: from TORCH_DIST_INIT_BARRIER, else true
	goRanks    []int // nil: this program's app context
	goRanksSet bool
}

// WithTorchPeers tells Init that some ranks of the world are PyTorch
// processes that called torch.distributed.init_process_group("mpi"), as in
// an MPMD job (mpirun -np 1 python3 learner.py : -np 4 ./sim). Torch's
// process group is MPI_COMM_WORLD itself, and collective calls on the world
// must match across all ranks, so Init then makes no collective call on the
// world that torch's ranks do not make:
//
//   - no duplicate of the world communicator: the world group's library
//     communicator is the world communicator itself, where torch's
//     messages travel too (torch uses tag 0; tensordict's WithTorch
//     speaks torch's protocol there);
//   - the one MPI_Barrier on the world that init_process_group makes at its
//     end: always in torch 1.x, only with TORCH_DIST_INIT_BARRIER=1 from
//     torch 2.1 on. By default Init makes it unless TORCH_DIST_INIT_BARRIER
//     is set to "0" in its environment (export the variable to every rank,
//     or set it with TorchInitBarrier), so that torch 1.x and torch 2.x with
//     TORCH_DIST_INIT_BARRIER=1 both work;
//   - Go-to-Go traffic gets a group of its own, GoGroup, made with
//     MPI_Comm_create_group over the Go ranks, which is collective over
//     them only. The Go ranks are those of this program's app context
//     (Open MPI's OMPI_MCA_orte_app_num and OMPI_APP_CTX_NUM_PROCS), or
//     the ones TorchGoRanks lists.
//
// Collectives on the world group are collectives of the whole job:
// Barrier matches Python's torch.distributed.barrier(), and Split would
// need torch's ranks to make an MPI_Comm_split they never make. New over
// Go ranks only is fine (MPI_Comm_create_group). Subgroups that torch's
// ranks must take part in (torch.distributed.new_group) are not supported.
func WithTorchPeers(opts ...TorchOption) Option {
	return func(c *config) {
		t := &torchConfig{}
		for _, o := range opts {
			o(t)
		}
		c.torch = t
	}
}

// TorchInitBarrier says whether the torch ranks make the barrier at the
// end of init_process_group: true for torch 1.x, and for torch 2.1 or later
// run with TORCH_DIST_INIT_BARRIER=1; false for torch 2.1 or later by
// default. It overrides the environment variable.
func TorchInitBarrier(on bool) TorchOption {
	return func(t *torchConfig) { t.barrier = &on }
}

// TorchGoRanks lists the world ranks that run Go (tdmpi) rather than torch,
// for jobs where they are not one app context, or for launchers that do
// not say (MPICH's hydra). Every Go rank must list the same ranks.
func TorchGoRanks(ranks ...int) TorchOption {
	return func(t *torchConfig) { t.goRanks, t.goRanksSet = slices.Clone(ranks), true }
}

// wantBarrier resolves whether Init makes torch's init barrier.
func (t *torchConfig) wantBarrier() (bool, error) {
	if t.barrier != nil {
		return *t.barrier, nil
	}
	switch v := os.Getenv("TORCH_DIST_INIT_BARRIER"); v {
	case "", "1":
		return true, nil
	case "0":
		return false, nil
	default:
		return false, fmt.Errorf("TORCH_DIST_INIT_BARRIER=%q: want 0 or 1", v)
	}
}

// appContextRanks returns the world ranks of this process's app context
// from Open MPI's environment, or nil if it does not say.
func appContextRanks(worldSize int) ([]int, error) {
	num, ok1 := os.LookupEnv("OMPI_MCA_orte_app_num")
	sizes, ok2 := os.LookupEnv("OMPI_APP_CTX_NUM_PROCS")
	if !ok1 || !ok2 {
		return nil, nil
	}
	app, err := strconv.Atoi(num)
	if err != nil {
		return nil, fmt.Errorf("OMPI_MCA_orte_app_num=%q: %w", num, err)
	}
	first, total := 0, 0
	var mine []int
	for i, f := range strings.Fields(sizes) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("OMPI_APP_CTX_NUM_PROCS=%q: field %d is not a count", sizes, i)
		}
		if i == app {
			for r := first; r < first+n; r++ {
				mine = append(mine, r)
			}
		}
		first += n
		total += n
	}
	if total != worldSize || len(mine) == 0 {
		return nil, fmt.Errorf("OMPI_APP_CTX_NUM_PROCS=%q with app %d does not describe a world of %d ranks", sizes, app, worldSize)
	}
	return mine, nil
}

// goRanksTag is the MPI_Comm_create_group tag of the Go ranks' group.
const goRanksTag = createTagBase + createTagCount - 1

// torchWorld makes the world group of a job with torch peers (see
// WithTorchPeers) on w. The error has no "group:" prefix.
func torchWorld(w *mpi.Comm, t *torchConfig) (*Group, error) {
	g := &Group{comm: w, lib: w, rank: w.Rank(), size: w.Size(), world: true, torch: true}
	g.initPayloadTags()
	barrier, err := t.wantBarrier()
	if err != nil {
		return nil, err
	}
	if barrier {
		if err := w.Barrier(); err != nil {
			return nil, fmt.Errorf("torch's init barrier on the world: %w", err)
		}
	}
	ranks := t.goRanks
	if !t.goRanksSet {
		if ranks, err = appContextRanks(g.size); err != nil {
			return nil, fmt.Errorf("finding the Go ranks (say them with TorchGoRanks): %w", err)
		}
	}
	register(g)
	if ranks == nil {
		return g, nil
	}
	if err := g.checkRanks(ranks); err != nil {
		unregister(g)
		return nil, fmt.Errorf("the Go ranks: %w", err)
	}
	sorted := slices.Sorted(slices.Values(ranks))
	comm, err := w.CreateGroup(sorted, goRanksTag)
	if err != nil {
		unregister(g)
		return nil, fmt.Errorf("the group of the Go ranks %v: %w", sorted, err)
	}
	sub, err := newGroup(comm, false)
	if err != nil {
		unregister(g)
		return nil, fmt.Errorf("the group of the Go ranks %v: %w", sorted, err)
	}
	g.goGroup = sub
	return g, nil
}

// TorchPeers reports whether g is the world group of an Init with
// WithTorchPeers.
func (g *Group) TorchPeers() bool { return g.torch }

// GoGroup returns the group of the world's Go ranks, in world rank order,
// made by Init with WithTorchPeers: the group for tdmpi's Go-to-Go
// transfers and collectives, which torch's ranks take no part in. It
// returns nil for any other group, and when Init could not tell which
// ranks run Go (see TorchGoRanks).
func (g *Group) GoGroup() *Group { return g.goGroup }
