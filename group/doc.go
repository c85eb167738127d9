// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package group provides process groups over MPI communicators, the role
// torch.distributed's process groups play for Python tensordict.
//
// # Starting and stopping
//
// Main runs a program's body on every rank: it starts MPI, calls the
// body with the world group and stops MPI; when the body returns an error
// or panics on any rank, Main prints it, "rank R of N (host): <error>",
// and aborts the whole job, so that no rank waits for a failed one:
//
//	func main() {
//		group.Main(func(g *group.Group) error {
//			// ... tdmpi calls; return an error to end the job
//			return nil
//		})
//	}
//
// Init starts MPI with thread level MULTIPLE and returns the world group,
// the group of every rank the launcher started. Finalize stops MPI. Both
// are called once per process, usually from main or TestMain:
//
//	g, err := group.Init()
//	if err != nil {
//		return err
//	}
//	defer group.Finalize()
//
// A rank that finalizes while others wait for it without a context (its
// program returned an error) does not leave them waiting: Finalize tells
// the other ranks of its groups that it leaves, and their receives from it,
// sends to it that it has not taken, and collectives on its groups return
// an error wrapping ErrPeerLeft, naming it, within about a second (see
// Finalize). Waits bounded by a
// context end when it does. The ranks' own Finalize calls then meet, and
// the job ends.
//
// Init reads the launcher's environment with hpc.Detect and refuses to go
// on when the launcher started several ranks but MPI sees a world of one:
// every rank would then compute alone (see hpc.LaunchError).
//
// A second Init returns the world group of the first. After Finalize, MPI
// cannot start again and Init returns an error. Finalize is idempotent.
//
// # Groups and communicators
//
// Every Group owns two communicators with the same ranks. Comm is the
// user's: messages and collectives the program sends itself, with package
// mpi. The other is a private duplicate for tdmpi's own protocol messages,
// so library traffic never matches a user's receive, whatever its source
// and tag; programs never see it. What tdmpi's packages keep per group
// (that communicator, its tags, the protocol lock, the state of broken
// groups and of ranks that left) is reached through internal/proto, not
// through Group's methods.
//
// New makes a subgroup of some ranks, like torch.distributed.new_group; only
// the members call it. Split partitions a group by color, as
// MPI_Comm_split. Both return groups the caller frees with Free. WorldRank
// and GroupRank translate ranks between a group and the world.
//
// # Jobs with PyTorch ranks
//
// With WithTorchPeers, Init expects some ranks of the world to be PyTorch
// processes on torch.distributed's "mpi" backend, whose process group is
// MPI_COMM_WORLD itself. It then makes no collective call on the world
// that torch's ranks do not make: the world group's library communicator
// is the world communicator (no duplicate), Init makes torch's init barrier (see
// TorchInitBarrier), and the Go ranks get a group of their own, GoGroup,
// made with MPI_Comm_create_group, which only they take part in.
//
// # Concurrency
//
// A Group may be used from several goroutines at once; tdmpi's own
// protocols on one group take turns. As with any MPI communicator,
// collective operations on a group must be called in the same order on
// every rank: the program's own on Comm, and package tensordict's.
//
// # Errors
//
// Errors name the operation and the rank: "group: New: rank 1 of 4:
// ranks[2] = 7 is out of range [0,4)". Invalid arguments are found before
// any MPI call, so a bad call returns at once instead of hanging.
//
// # Files
//
//	main.go    Main: a program whose failing rank ends the job
//	init.go    Init and Finalize (MPI once per process), World, the launch
//	           check, the registry of live groups
//	leave.go   leave notices: Finalize tells the other ranks, the watcher
//	           takes their notices (proto.Departed, Departures, Left,
//	           PeerLeft, Gone report them)
//	group.go   Group: Rank, Size, Comm, Env, Barrier, WorldRank, GroupRank
//	proto.go   the Group's protocol state as internal/proto sees it:
//	           library communicator, payload tags, protocol lock,
//	           Collective, Break and Broken, Slot storage
//	tags.go    the tag space of the library communicator: MaxUserTag
//	torch.go   WithTorchPeers: jobs with PyTorch ranks, GoGroup
//	new.go     New and Split: subgroups over new communicators
//	option.go  Option: WithThreadLevel, WithEnv, WithoutLaunchCheck, WithLogger,
//	           WithAllProcs
//	procs.go   GOMAXPROCS: each rank's fair share of the CPUs it shares
//	errors.go  ErrFreed, ErrNotMember, ErrNotInitialized, ErrBroken,
//	           ErrPeerLeft, ErrOrder, and the error text that names the
//	           group
package group
