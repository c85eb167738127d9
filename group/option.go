// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package group

import (
	"github.com/rs/zerolog"

	"github.com/tdmpi/tdmpi/hpc"
	"github.com/tdmpi/tdmpi/mpi"
)

// Option configures Init.
type Option func(*config)

type config struct {
	level    mpi.ThreadLevel
	env      *hpc.Env
	noCheck  bool
	logger   *zerolog.Logger
	torch    *torchConfig // WithTorchPeers
	allProcs bool         // WithAllProcs
}

// WithThreadLevel asks MPI for thread support level l instead of
// mpi.ThreadMultiple. Init fails if MPI provides less than l. Below
// ThreadMultiple, the program must never call MPI from two goroutines at
// once, which this package does not enforce.
func WithThreadLevel(l mpi.ThreadLevel) Option {
	return func(c *config) { c.level = l }
}

// WithEnv makes Init use env instead of hpc.Detect(), for launchers
// hpc does not know.
func WithEnv(env hpc.Env) Option {
	return func(c *config) { c.env = &env }
}

// WithoutLaunchCheck makes Init accept a world of one rank even when the
// launcher's environment promised more.
func WithoutLaunchCheck() Option {
	return func(c *config) { c.noCheck = true }
}

// WithAllProcs makes Init leave GOMAXPROCS as Go set it. By default, a
// rank that shares the CPUs it may run on with other ranks of the job on
// its node (started without binding, as by mpirun --bind-to none, or bound
// to a socket, as Open MPI's mpirun binds three ranks or more) gets its
// fair share of them: each CPU counts 1/n for each of the n ranks that may
// run on it, and GOMAXPROCS becomes the sum, rounded down, at least 1,
// unless the GOMAXPROCS environment variable is set. Without that, n such
// ranks would run n times as many Go processors as they have CPUs, and
// their collectors and goroutines would contend with the ranks' own
// threads for the cores, which slows small transfers most. Use
// WithAllProcs when the ranks of a node take turns to compute, each on all
// the cores.
func WithAllProcs() Option {
	return func(c *config) { c.allProcs = true }
}

// WithLogger makes tdmpi log through l, at l's level (TDMPI_LOG is then
// ignored). The rank, size and host fields are added to l.
func WithLogger(l zerolog.Logger) Option {
	return func(c *config) { c.logger = &l }
}
