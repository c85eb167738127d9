// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Communication patterns. A method's step moves the payload twice, so
// that one step is a round and the one-way time is half a step.
const (
	// patternP2P: rank 0 sends to rank 1, which sends back (ping-pong).
	// Other ranks idle.
	patternP2P = "p2p"
	// patternBcast: a broadcast from rank 0, then one from rank 1. The
	// second cannot start before rank 1 has the first, so it is a
	// ping-pong through broadcasts. Every rank takes part.
	patternBcast = "bcast"
	// patternAllreduce: two allreduces (sums) in a row; every rank takes
	// part. Its "one-way" time is that of one allreduce.
	patternAllreduce = "allreduce"
)

// rawTag is the tag of the raw MPI messages on the group's user
// communicator.
const rawTag = 7

// method is one way of moving size bytes between ranks.
type method struct {
	name     string // as in tables, CSV and -methods
	pattern  string // patternP2P, patternBcast or patternAllreduce
	baseline string // the raw method of the same pattern; "" for the baselines
	desc     string
	td       bool // the method moves TensorDicts (of -leaves leaves)

	// prepare sets the method up for payloads of size bytes in leaves
	// leaves (TensorDict methods) and returns its step and the function
	// that releases what prepare made. Every rank calls it.
	prepare func(g *group.Group, size int64, leaves int) (step func() error, done func() error, err error)
}

// methods lists the methods bench measures, baselines first.
var methods = []*method{
	{name: "raw-p2p", pattern: patternP2P, desc: "mpi.Send and mpi.Recv of a []byte", prepare: prepareRawP2P},
	{name: "raw-bcast", pattern: patternBcast, desc: "mpi.Bcast of a []byte", prepare: prepareRawBcast},
	{name: "raw-allreduce", pattern: patternAllreduce, desc: "mpi.AllreduceInPlace (sum) of a []byte", prepare: prepareRawAllreduce},
	{name: "raw-p2p-hp", pattern: patternP2P, baseline: "raw-p2p", desc: "mpi.Send and mpi.Recv of off-heap huge-page memory", prepare: prepareRawP2PHuge},
	{name: "initremote", td: true, pattern: patternP2P, baseline: "raw-p2p", desc: "InitRemote and FromRemoteInit", prepare: prepareInitRemote(false, false)},
	{name: "initremote-bc", td: true, pattern: patternBcast, baseline: "raw-bcast", desc: "InitRemote and FromRemoteInit with WithBroadcast", prepare: prepareInitRemote(true, false)},
	{name: "initremote-re", td: true, pattern: patternP2P, baseline: "raw-p2p", desc: "InitRemote and FromRemoteInit with WithAllocator reusing the previous result's storage", prepare: prepareInitRemote(false, true)},
	{name: "initremote-set", td: true, pattern: patternP2P, baseline: "raw-p2p", desc: "InitRemote of a TensorDict whose leaves were set one by one, each result dropped", prepare: prepareInitRemoteSet},
	{name: "broadcast", td: true, pattern: patternBcast, baseline: "raw-bcast", desc: "Broadcast, the collective, the source alternating", prepare: prepareBroadcast},
	{name: "broadcast-one", td: true, pattern: patternBcast, baseline: "raw-bcast", desc: "Broadcast from rank 0 every time", prepare: prepareBroadcastOne},
	{name: "send-consol", td: true, pattern: patternP2P, baseline: "raw-p2p", desc: "Send and Recv with WithConsolidated", prepare: prepareSendRecv(true)},
	{name: "send-leaves", td: true, pattern: patternP2P, baseline: "raw-p2p", desc: "Send and Recv, one message per leaf", prepare: prepareSendRecv(false)},
	{name: "allreduce", td: true, pattern: patternAllreduce, baseline: "raw-allreduce", desc: "AllReduce (sum) of leaves in storages of their own", prepare: prepareAllReduce(false)},
	{name: "allreduce-cons", td: true, pattern: patternAllreduce, baseline: "raw-allreduce", desc: "AllReduce (sum) of a consolidated TensorDict", prepare: prepareAllReduce(true)},
}

// selectMethods returns the methods named in the comma-separated list, in
// the order of methods, with the baselines they need.
func selectMethods(list string) ([]*method, error) {
	if list == "" || list == "all" {
		return methods, nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, m := range methods {
			if m.name == name {
				want[name], found = true, true
				if m.baseline != "" {
					want[m.baseline] = true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown method %q (have %s)", name, methodNames())
		}
	}
	var out []*method
	for _, m := range methods {
		if want[m.name] {
			out = append(out, m)
		}
	}
	return out, nil
}

// methodNames returns the names of all methods, comma-separated.
func methodNames() string {
	names := make([]string, len(methods))
	for i, m := range methods {
		names[i] = m.name
	}
	return strings.Join(names, ",")
}

func noop() error { return nil }

func prepareRawP2P(g *group.Group, size int64, _ int) (func() error, func() error, error) {
	return rawPingPong(g, heapBuffer(size)), noop, nil
}

// heapBuffer returns a new Go heap buffer of size bytes in 4 KiB pages
// (mem.NoHuge), as make gives a program that advised nothing where the
// kernel uses transparent huge pages only when asked (the Debian
// default): the raw baselines' memory. Heap memory that the receive pool
// or an earlier method faulted in as huge pages keeps them when make
// reuses it, and MPI moves those up to twice as fast: a raw baseline of
// plain make ran at 9.3-14.5 GB/s at 256 MiB from one run to the next
// (9.2-9.6 in 4 KiB pages; 19-20 on huge pages).
func heapBuffer(size int64) []byte { return mem.NoHuge(make([]byte, size)) }

// prepareRawP2PHuge is prepareRawP2P on memory outside the Go heap,
// advised to use huge pages (tensor.NewOffHeapStorage), which MPI moves
// faster than heap memory.
func prepareRawP2PHuge(g *group.Group, size int64, _ int) (func() error, func() error, error) {
	st, err := tensor.NewOffHeapStorage(int(size))
	if err != nil {
		return nil, nil, err
	}
	return rawPingPong(g, st.Bytes()), st.Release, nil
}

// rawPingPong returns the step of a ping-pong of buf between ranks 0 and
// 1 with mpi.Send and mpi.Recv.
func rawPingPong(g *group.Group, buf []byte) func() error {
	c := g.Comm()
	switch g.Rank() {
	case 0:
		return func() error {
			if err := mpi.Send(c, buf, 1, rawTag); err != nil {
				return err
			}
			_, err := mpi.Recv(c, buf, 1, rawTag)
			return err
		}
	case 1:
		return func() error {
			if _, err := mpi.Recv(c, buf, 0, rawTag); err != nil {
				return err
			}
			return mpi.Send(c, buf, 0, rawTag)
		}
	}
	return noop
}

func prepareRawBcast(g *group.Group, size int64, _ int) (func() error, func() error, error) {
	c := g.Comm()
	buf := heapBuffer(size)
	return func() error {
		if err := mpi.Bcast(c, buf, 0); err != nil {
			return err
		}
		return mpi.Bcast(c, buf, 1)
	}, noop, nil
}

// benchTD returns a consolidated TensorDict of size bytes in min(leaves,
// size) uint8 leaves of nearly equal sizes, in nested groups of 8 leaves.
func benchTD(size int64, leaves int) (*tensordict.TensorDict, error) {
	td, err := benchLeaves(size, leaves)
	if err != nil {
		return nil, err
	}
	return td.Consolidate()
}

// benchLeaves returns benchTD's TensorDict before it is consolidated:
// each leaf in a storage of its own.
func benchLeaves(size int64, leaves int) (*tensordict.TensorDict, error) {
	n := int64(leaves)
	if size < n {
		n = max(size, 1)
	}
	td := tensordict.New()
	for i := range n {
		ln := size / n
		if i < size%n {
			ln++
		}
		t := tensor.Full(tensor.Uint8, float64(i%251), int(ln))
		k := tensordict.K(fmt.Sprintf("g%d", i/8), fmt.Sprintf("x%03d", i))
		if err := td.Set(k, t); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// leafCount returns the number of leaves benchTD makes.
func leafCount(size int64, leaves int) int {
	if size < int64(leaves) {
		return int(max(size, 1))
	}
	return leaves
}

func prepareInitRemote(bcast, reuse bool) func(*group.Group, int64, int) (func() error, func() error, error) {
	return func(g *group.Group, size int64, leaves int) (func() error, func() error, error) {
		opts := []tensordict.RemoteOption{tensordict.WithGroup(g)}
		if bcast {
			opts = append(opts, tensordict.WithBroadcast())
		}
		// With reuse, every result is built in the storage of the one
		// before (released only at the end), as a loop that is done with
		// each result before the next would.
		var spare *tensor.Storage
		release := func(got *tensordict.TensorDict) error {
			if !reuse {
				return got.Release()
			}
			spare = got.ConsolidatedStorage()
			return nil
		}
		sendOpts := opts // the allocator is the receiving side's alone
		if reuse {
			opts = append(opts[:len(opts):len(opts)], tensordict.WithAllocator(func(n int) (*tensor.Storage, error) {
				if spare != nil && spare.Len() == n {
					return spare, nil
				}
				return tensor.NewStorage(n), nil
			}))
		}
		rank := g.Rank()
		if !bcast && rank > 1 {
			return noop, noop, nil
		}
		var td *tensordict.TensorDict
		if rank == 0 {
			var err error
			if td, err = benchTD(size, leaves); err != nil {
				return nil, nil, err
			}
		}
		recv := func(src int) (*tensordict.TensorDict, error) {
			return tensordict.FromRemoteInit(src, opts...)
		}
		return func() error {
				switch rank {
				case 0:
					if err := td.InitRemote(1, sendOpts...); err != nil {
						return err
					}
					back, err := recv(1)
					if err != nil {
						return err
					}
					return release(back)
				case 1:
					got, err := recv(0)
					if err != nil {
						return err
					}
					return errors.Join(got.InitRemote(0, sendOpts...), release(got))
				default: // broadcast only: receive both
					for src := range 2 {
						got, err := recv(src)
						if err != nil {
							return err
						}
						if err := release(got); err != nil {
							return err
						}
					}
					return nil
				}
			}, func() error {
				var err error
				if td != nil {
					err = td.Release()
				}
				if spare != nil {
					err = errors.Join(err, spare.Release())
				}
				return err
			}, nil
	}
}

// prepareInitRemoteSet times InitRemote as a program that builds its
// TensorDicts with Set uses it: each rank sends a TensorDict of its own
// whose leaves have storages of their own (benchLeaves, never
// consolidated), the other receives it with FromRemoteInit and drops the
// result (no Release: the collector takes it), then the two swap roles.
func prepareInitRemoteSet(g *group.Group, size int64, leaves int) (func() error, func() error, error) {
	rank := g.Rank()
	if rank > 1 {
		return noop, noop, nil
	}
	td, err := benchLeaves(size, leaves)
	if err != nil {
		return nil, nil, err
	}
	opts := []tensordict.RemoteOption{tensordict.WithGroup(g)}
	recv := func(src int) error {
		_, err := tensordict.FromRemoteInit(src, opts...)
		return err
	}
	if rank == 0 {
		return func() error {
			if err := td.InitRemote(1, opts...); err != nil {
				return err
			}
			return recv(1)
		}, noop, nil
	}
	return func() error {
		if err := recv(0); err != nil {
			return err
		}
		return td.InitRemote(0, opts...)
	}, noop, nil
}

// prepareBroadcast times Broadcast as raw-bcast times mpi.Bcast: rank 0
// broadcasts its TensorDict, then rank 1 broadcasts the result it got, as
// a loop passing results on would. Every result a rank did not send is
// released (TensorDict.Release) once the next broadcast has taken it.
func prepareBroadcast(g *group.Group, size int64, leaves int) (func() error, func() error, error) {
	opts := []tensordict.CollectiveOption{tensordict.WithGroup(g)}
	td, release, err := bcastSource(g, size, leaves)
	if err != nil {
		return nil, nil, err
	}
	var got *tensordict.TensorDict // rank 1's result from rank 0, sent on
	return func() error {
		first, err := td.Broadcast(0, opts...)
		if err != nil {
			return err
		}
		if g.Rank() != 0 {
			got = first
		}
		second, err := got.Broadcast(1, opts...)
		if err != nil {
			return err
		}
		var rerr error
		if g.Rank() != 1 {
			rerr = second.Release()
		}
		if g.Rank() != 0 {
			rerr = errors.Join(rerr, got.Release())
		}
		got = nil
		return rerr
	}, release, nil
}

// bcastSource returns the broadcasts' TensorDict, rank 0's (nil
// elsewhere), and the function that releases it.
func bcastSource(g *group.Group, size int64, leaves int) (*tensordict.TensorDict, func() error, error) {
	if g.Rank() != 0 {
		return nil, noop, nil
	}
	td, err := benchTD(size, leaves)
	if err != nil {
		return nil, nil, err
	}
	return td, td.Release, nil
}

// prepareBroadcastOne times Broadcast as a learner that sends its weights
// to the other ranks every step uses it: rank 0 broadcasts its TensorDict
// twice a repetition; the others release each result.
func prepareBroadcastOne(g *group.Group, size int64, leaves int) (func() error, func() error, error) {
	opts := []tensordict.CollectiveOption{tensordict.WithGroup(g)}
	td, release, err := bcastSource(g, size, leaves)
	if err != nil {
		return nil, nil, err
	}
	return func() error {
		for range 2 {
			got, err := td.Broadcast(0, opts...)
			if err != nil {
				return err
			}
			if g.Rank() != 0 {
				if err := got.Release(); err != nil {
					return err
				}
			}
		}
		return nil
	}, release, nil
}

func prepareRawAllreduce(g *group.Group, size int64, _ int) (func() error, func() error, error) {
	c := g.Comm()
	buf := heapBuffer(size)
	return func() error {
		if err := mpi.AllreduceInPlace(c, buf, mpi.OpSum); err != nil {
			return err
		}
		return mpi.AllreduceInPlace(c, buf, mpi.OpSum)
	}, noop, nil
}

// prepareAllReduce times AllReduce as raw-allreduce times
// mpi.AllreduceInPlace: two sums of the same TensorDict in a row, its
// leaves in storages of their own (the gradients of a model, reduced
// leaf by leaf and in buckets) or consolidated (one call over the
// storage).
func prepareAllReduce(consolidated bool) func(*group.Group, int64, int) (func() error, func() error, error) {
	return func(g *group.Group, size int64, leaves int) (func() error, func() error, error) {
		build := benchLeaves
		if consolidated {
			build = benchTD
		}
		td, err := build(size, leaves)
		if err != nil {
			return nil, nil, err
		}
		opt := tensordict.WithGroup(g)
		return func() error {
			if err := td.AllReduce(tensordict.ReduceSum, opt); err != nil {
				return err
			}
			return td.AllReduce(tensordict.ReduceSum, opt)
		}, td.Release, nil
	}
}

func prepareSendRecv(consolidated bool) func(*group.Group, int64, int) (func() error, func() error, error) {
	return func(g *group.Group, size int64, leaves int) (func() error, func() error, error) {
		rank := g.Rank()
		if rank > 1 {
			return noop, noop, nil
		}
		td, err := benchTD(size, leaves)
		if err != nil {
			return nil, nil, err
		}
		opts := []tensordict.PayloadOption{tensordict.WithGroup(g)}
		if consolidated {
			opts = append(opts, tensordict.WithConsolidated())
		}
		sendOpts, recvOpts := make([]tensordict.SendOption, len(opts)), make([]tensordict.RecvOption, len(opts))
		for i, o := range opts {
			sendOpts[i], recvOpts[i] = o, o
		}
		peer := 1 - rank
		return func() error {
			if rank == 0 {
				if err := td.Send(peer, sendOpts...); err != nil {
					return err
				}
				_, err := td.Recv(peer, recvOpts...)
				return err
			}
			if _, err := td.Recv(peer, recvOpts...); err != nil {
				return err
			}
			return td.Send(peer, sendOpts...)
		}, td.Release, nil
	}
}
