// Command shard runs the data-parallel round trip of a batch: rank 0 cuts
// a batch into one shard per rank with SplitSizes, Scatter hands every rank
// its shard, each rank computes on its shard in place, AllGather brings
// every shard to every rank, and Cat joins them into one batch again.
//
// Run it with any number of ranks:
//
//	go build -o bin/examples/shard ./examples/shard
//	mpirun -np 4 --oversubscribe --bind-to none bin/examples/shard
//
// The batch has 10 rows: "obs" (float32 [10 4], row r holding 4r ..
// 4r+3), "stats"/"reward" (float64 [10], r/2) and "id" (int64 [10], r).
// Rows are shared out as evenly as they go (10 over 4 ranks: 3, 3, 2, 2).
// Each rank sets obs to 2*obs + 1 with MulScalarInPlace and
// AddScalarInPlace and squares the rewards with PowScalarInPlace, in the
// storage Scatter received into. Every rank then checks the joined batch
// against the same arithmetic done out of place on the whole batch, and
// that the ids come back in order. The program exits with status 1 if a
// check or a call fails.
//
// The lines below tell hpc/scripts/examples.sh how to run and check this program.
//
// np: 4
// expect: ^rank 0: 10 rows in shards of \[3 3 2 2\] over 4 ranks, computed in place, gathered and joined: batch \[10\]$
// expect: ^OK$
package main

import (
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// rows is the batch size.
const rows = 10

func main() {
	// Main starts MPI and runs run on every rank with the world group; an
	// error or a panic on any rank is printed and ends the whole job.
	group.Main(run)
}

// batch returns the whole batch. Every rank can build it, to check the
// result; only rank 0 scatters it.
func batch() (*tensordict.TensorDict, error) {
	td := tensordict.New(rows)
	obs, err := tensor.Arange(tensor.Float32, 0, 4*rows, 1)
	if err != nil {
		return nil, err
	}
	if obs, err = obs.Reshape(rows, 4); err != nil {
		return nil, err
	}
	reward, err := tensor.Arange(tensor.Float64, 0, rows/2.0, 0.5)
	if err != nil {
		return nil, err
	}
	id, err := tensor.Arange(tensor.Int64, 0, rows, 1)
	if err != nil {
		return nil, err
	}
	for _, l := range []struct {
		k tensordict.Key
		t *tensor.Tensor
	}{{tensordict.K("obs"), obs}, {tensordict.K("stats", "reward"), reward}, {tensordict.K("id"), id}} {
		if err := td.Set(l.k, l.t); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// shardSizes shares n rows out over size ranks as evenly as they go.
func shardSizes(n, size int) []int {
	sizes := make([]int, size)
	for i := range sizes {
		sizes[i] = n / size
		if i < n%size {
			sizes[i]++
		}
	}
	return sizes
}

// compute transforms a shard in place: obs = 2*obs + 1, reward = reward^2.
// The leaves keep the storage Scatter received them into.
func compute(shard *tensordict.TensorDict) error {
	obs, err := shard.Select(tensordict.K("obs"))
	if err != nil {
		return err
	}
	if err := obs.MulScalarInPlace(2); err != nil {
		return err
	}
	if err := obs.AddScalarInPlace(1); err != nil {
		return err
	}
	stats, err := shard.GetTD(tensordict.K("stats"))
	if err != nil {
		return err
	}
	return stats.PowScalarInPlace(2)
}

func run(g *group.Group) error {
	rank, size := g.Rank(), g.Size()
	whole, err := batch()
	if err != nil {
		return err
	}
	sizes := shardSizes(rows, size)

	// Rank 0 cuts the batch into views, one per rank, and scatters them;
	// the other ranks pass nothing.
	var parts []*tensordict.TensorDict
	if rank == 0 {
		if parts, err = whole.SplitSizes(sizes, 0); err != nil {
			return err
		}
	}
	shard, err := whole.Scatter(0, parts)
	if err != nil {
		return err
	}
	if got := shard.BatchSize(); len(got) != 1 || got[0] != sizes[rank] {
		return fmt.Errorf("shard has batch size %v, want [%d]", got, sizes[rank])
	}
	if err := compute(shard); err != nil {
		return err
	}

	// Every rank receives every shard and joins them in rank order.
	gathered, err := shard.AllGather()
	if err != nil {
		return err
	}
	joined, err := tensordict.Cat(gathered, 0)
	if err != nil {
		return err
	}

	// The same arithmetic, out of place, on the whole batch.
	obs, err := whole.Get(tensordict.K("obs"))
	if err != nil {
		return err
	}
	reward, err := whole.Get(tensordict.K("stats", "reward"))
	if err != nil {
		return err
	}
	sq, err := reward.PowScalar(2)
	if err != nil {
		return err
	}
	want := tensordict.New(rows)
	for _, l := range []struct {
		k tensordict.Key
		t *tensor.Tensor
	}{{tensordict.K("obs"), obs.MulScalar(2).AddScalar(1)}, {tensordict.K("stats", "reward"), sq}} {
		if err := want.Set(l.k, l.t); err != nil {
			return err
		}
	}
	id, err := whole.Get(tensordict.K("id"))
	if err != nil {
		return err
	}
	if err := want.Set(tensordict.K("id"), id); err != nil {
		return err
	}
	ok, err := joined.AllClose(want, 1e-6, 1e-6)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("joined batch differs from the batch computed whole")
	}

	// A rank whose check failed has aborted the job (group.Main), so rank 0
	// passes this barrier only if every rank succeeded.
	if err := g.Barrier(); err != nil {
		return err
	}
	if rank == 0 {
		fmt.Printf("rank 0: %d rows in shards of %v over %d ranks, computed in place, gathered and joined: batch %v\n",
			rows, sizes, size, joined.BatchSize())
		fmt.Println("OK")
	}
	return nil
}
