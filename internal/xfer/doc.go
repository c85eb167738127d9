// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Package xfer is tdmpi's transfer protocol: what tensordict's
// communication methods stand on below the TensorDict, on a group's
// library communicator. Programs do not import it.
//
// It knows messages, tags and groups, not TensorDicts: tensordict lays a
// TensorDict out and describes it (internal/codec, internal/wire), and
// xfer moves the bytes. Every wait is bounded by the call's context when
// the context can end: a receive is probed without blocking (Probe,
// Poll) and a large message received with MPI_Irecv (MPI_Imrecv once
// matched), tested, and abandoned if the context ends first (RecvExact,
// RecvMatched, ErrAbandoned), a send
// is posted and polled (Link.SendMessages), a collective
// step is started in its nonblocking form and tested (Step.Wait). What a
// peer announced and never sent is drained for at most DrainIdle per
// message, and a message of the wrong size is discarded, never received
// into a buffer too short for it. A wait that no context bounds ends when
// the rank it waits for leaves the group (proto.Departures,
// proto.Departed, proto.Gone): a receive from it returns an error
// wrapping group.ErrPeerLeft unless its message came first, a send to it
// of a message MPI does not send eagerly (EagerSendMax) is given up with
// such an error, and a collective step breaks the group.
//
// Files:
//
//	link.go        Link, the sends of a point-to-point transfer, frame
//	               alignment
//	recv.go        probes, exact receives, chunks
//	drain.go       the drains of refused transfers: Discard,
//	               DrainMessages, DrainSend, DrainInit
//	background.go  the queues of background receives (IRecv's), and the
//	               stepping that moves them without a goroutine
//	tags.go        the header tag, per-leaf tag plans, Python
//	               tensordict's IntGenerator
//	locks.go       the per-group tag locks that keep concurrent transfers
//	               on the same tags apart
//	kept.go        the structures InitRemote's receivers keep, so that
//	               the next frames of a structure travel without their
//	               metadata
//	step.go        collective steps: blocking or nonblocking as the ranks
//	               agreed, deferred for asynchronous collectives, given up
//	               after StepGrace, and breaking the group when given up
//	               or failed
//	agree.go       the agreements' combines (Combine, Fold)
//	any.go         SendAny, RecvAny: []int64 or []byte messages, sent
//	               or broadcast as torch's ranks do
//	log.go         one start line and one error line per operation,
//	               through internal/log
//
// Per-group state (the tag locks, the kept structures) is a proto.Slot: it goes away with the
// group.
package xfer
