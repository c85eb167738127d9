// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/mpi"
)

// state is the process's MPI session.
var state struct {
	mu    sync.Mutex
	world *Group
	// cur is world, for World to read without taking mu.
	cur   atomic.Pointer[Group]
	env   hpc.Env
	owned bool // Init started MPI, so Finalize stops it
	done  bool // Finalize ran
	watch bool // the leave watcher runs between Init and Finalize (leave.go)

	regMu sync.Mutex
	seq   uint64
	live  map[*Group]struct{} // groups not yet freed
}

func register(g *Group) {
	state.regMu.Lock()
	defer state.regMu.Unlock()
	state.seq++
	g.seq = state.seq
	if state.live == nil {
		state.live = make(map[*Group]struct{})
	}
	state.live[g] = struct{}{}
	g.leave.departed = make(chan struct{})
}

func unregister(g *Group) {
	state.regMu.Lock()
	defer state.regMu.Unlock()
	delete(state.live, g)
}

// Init starts MPI with thread level mpi.ThreadMultiple and returns the world
// group. It detects the launcher with hpc.Detect and returns an error, after
// stopping MPI, if the launcher started several ranks but MPI sees a world
// of one (a PMI mismatch; see hpc.LaunchError).
//
// A rank that shares the CPUs it may run on with other ranks of the job
// (started without binding, as by mpirun --bind-to none, or bound to a
// socket) gets its fair share of them: Init lowers GOMAXPROCS to it,
// unless the GOMAXPROCS environment variable is set or WithAllProcs is
// given (see WithAllProcs). To know it, the ranks of each node exchange
// their affinity masks: Init is collective over the world, as MPI's own
// initialisation is (with WithTorchPeers there is no exchange, and a rank
// that may run on every CPU assumes the job's other ranks on its node may
// too).
//
// While MPI runs, a goroutine takes the leave notices of ranks that
// finalize (see Finalize), every 0.1 s; not with a thread level below
// ThreadMultiple (WithThreadLevel), where only one goroutine may call MPI
// at a time: waits for a rank that left then end only by their contexts.
//
// A second Init returns the same world group; its options are ignored.
// Init after Finalize returns an error: MPI cannot start twice in a
// process. If MPI was started before, by mpi.Init, Init uses it and
// Finalize leaves stopping it to the caller of mpi.Init.
func Init(opts ...Option) (*Group, error) {
	cfg := config{level: mpi.ThreadMultiple}
	for _, o := range opts {
		o(&cfg)
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.world != nil {
		return state.world, nil
	}
	if state.done || mpi.Finalized() {
		return nil, errors.New("group: Init: MPI was finalized and cannot start again in this process")
	}

	env := hpc.Env{}
	if cfg.env != nil {
		env = *cfg.env
	} else {
		env = hpc.Detect()
	}
	if env.MPI == "" {
		env.MPI = mpi.LibraryName()
	}
	if cfg.logger != nil {
		log.SetBase(*cfg.logger)
		log.SetLevel(cfg.logger.GetLevel())
	}

	owned := false
	if !mpi.Initialized() {
		got, err := mpi.InitThread(cfg.level)
		if err != nil {
			return nil, fmt.Errorf("group: Init (%v): %w", env, err)
		}
		owned = true
		if got < cfg.level {
			return nil, errors.Join(
				fmt.Errorf("group: Init: MPI provides thread level %v, want %v", got, cfg.level),
				finalizeMPI())
		}
	}
	w := mpi.World()
	rank, size := w.Rank(), w.Size()
	if !cfg.noCheck {
		if err := launchError(env, rank, size); err != nil {
			if owned {
				err = errors.Join(err, finalizeMPI())
			}
			return nil, err
		}
	}
	log.SetRankSize(rank, size)
	shareProcs(w, env, cfg.allProcs, cfg.torch != nil)
	var g *Group
	var err error
	if cfg.torch != nil {
		g, err = torchWorld(w, cfg.torch)
	} else {
		g, err = newGroup(w, true)
	}
	if err != nil {
		err = fmt.Errorf("group: Init: rank %d of %d: %w", rank, size, err)
		if owned {
			err = errors.Join(err, finalizeMPI())
		}
		return nil, err
	}
	state.world, state.env, state.owned = g, env, owned
	state.cur.Store(g)
	state.watch = cfg.level == mpi.ThreadMultiple
	if state.watch {
		startWatcher()
	}
	log.Logger().Debug().Stringer("env", env).Str("mpi", mpi.LibraryVersion()).Msg("group: Init")
	return g, nil
}

// launchError returns an error if env says the launcher started more than
// one rank but MPI sees a world of one.
func launchError(env hpc.Env, rank, size int) error {
	if err := env.CheckSize(size); err != nil {
		return fmt.Errorf("group: Init: rank %d of %d: %w", rank, size, err)
	}
	return nil
}

func finalizeMPI() error {
	state.done = true
	if err := mpi.Finalize(); err != nil {
		return fmt.Errorf("group: Finalize: %w", err)
	}
	return nil
}

// Finalize frees every group not yet freed, newest first, then stops MPI.
// Before that it tells the other ranks of each group that this rank
// leaves, and waits until each of them has said the same (they all call
// Finalize, as MPI requires): a rank that finalizes, after an error say,
// while its peers wait for it in a tdmpi call without a context, makes
// those calls return an error wrapping ErrPeerLeft within seconds, and
// its own Finalize returns once they have finalized in turn.
// Every goroutine must have finished its MPI work: while one is inside an
// MPI call, or a nonblocking operation is incomplete, Finalize frees
// nothing and returns an error wrapping mpi.ErrBusy that names them, and
// may be called again once they are done. It first waits for the small
// messages tdmpi sent from copies (mpix.SendCopy) to be taken by their
// receivers, however long that takes, as a blocking send would have, and
// logs a warning every 10 s while it waits. Finalize without Init, and a
// second Finalize, do nothing.
func Finalize() error {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.world == nil {
		return nil
	}
	stopWatcher()
	if state.owned {
		waitCopies()
		// Refuse before freeing anything, so that the program can finish
		// what is in progress and call Finalize again.
		if err := mpi.Busy(); err != nil {
			if state.watch {
				startWatcher()
			}
			return fmt.Errorf("group: Finalize: %w", err)
		}
	}
	state.regMu.Lock()
	groups := make([]*Group, 0, len(state.live))
	for g := range state.live {
		groups = append(groups, g)
	}
	state.regMu.Unlock()
	slices.SortFunc(groups, func(a, b *Group) int { return cmp.Compare(b.seq, a.seq) }) // newest first

	var errs []error
	if err := leaveGroups(groups); err != nil {
		errs = append(errs, err)
	}
	for _, g := range groups {
		if err := g.free(); err != nil {
			errs = append(errs, err)
		}
	}
	state.world = nil
	state.cur.Store(nil)
	if state.owned {
		errs = append(errs, finalizeMPI())
	}
	state.done = true
	return errors.Join(errs...)
}

// copyWaitReport is how often Finalize reports that it still waits for
// sends of copies in flight (waitCopies).
const copyWaitReport = 10 * time.Second

// waitCopies waits for the sends of copies in flight (mpix.SendCopy: the
// small messages of tdmpi's transfers) to complete, as mpi.Finalize would,
// and logs every copyWaitReport that it still does (their receivers have
// not taken them: a peer busy elsewhere, or gone), and a send that failed.
func waitCopies() {
	for waited := time.Duration(0); ; waited += copyWaitReport {
		n, err := mpix.WaitCopies(copyWaitReport)
		if err != nil {
			log.Logger().Error().Err(err).Msg("group: Finalize")
		}
		if n == 0 {
			return
		}
		log.Logger().Warn().Int("sends", n).Dur("waited", waited+copyWaitReport).
			Msg("group: Finalize: waiting for the receivers of sends in flight to take them")
	}
}

// World returns the world group, or nil before Init and after Finalize.
func World() *Group {
	return state.cur.Load()
}
