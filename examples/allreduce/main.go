// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 4
// expect: ^rank 0: averaged 4 leaves \(321 parameters\) over 4 ranks in [0-9.]+ ?[mµ]?s$
// expect: ^OK$

// Command allreduce averages "gradients" across ranks, the way data-parallel
// training does after each backward pass: every rank holds a TensorDict of
// gradients, AllReduce sums them on every rank, and each rank divides by the
// number of ranks in place with DivScalarInPlace.
//
// Run it with any number of ranks:
//
//	go build -o bin/examples/allreduce ./examples/allreduce
//	mpirun -np 4 --oversubscribe --bind-to none bin/examples/allreduce
//
// Rank r's gradient for every parameter is (r+1) * base, where base is a
// fixed ramp of values, so the mean over n ranks is base * (n+1)/2. The
// parameters are nested (policy.*, value.*) and of two dtypes (float32 and
// float64): AllReduce reduces each leaf with the MPI datatype of its dtype.
// Every rank checks the mean. The program exits with status 1 if a check or a
// call fails.
package main

import (
	"fmt"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

func main() {
	// Main starts MPI and runs run on every rank with the world group; an
	// error or a panic on any rank is printed and ends the whole job.
	group.Main(run)
}

// params lists the model's parameters: their keys, dtypes and shapes.
var params = []struct {
	key   tensordict.Key
	dtype tensor.DType
	shape []int
}{
	{tensordict.K("policy", "weight"), tensor.Float32, []int{8, 32}},
	{tensordict.K("policy", "bias"), tensor.Float32, []int{32}},
	{tensordict.K("value", "weight"), tensor.Float64, []int{32, 1}},
	{tensordict.K("value", "bias"), tensor.Float64, []int{1}},
}

// gradients returns a TensorDict holding scale * base for every parameter,
// where base is 0, 0.25, 0.5, ... in the parameter's shape. Gradients have no
// batch dimension, so the TensorDict's batch size is empty.
func gradients(scale float64) (*tensordict.TensorDict, error) {
	td := tensordict.New()
	for _, p := range params {
		n, err := tensor.Numel(p.shape)
		if err != nil {
			return nil, err
		}
		base, err := tensor.Arange(p.dtype, 0, float64(n)*0.25, 0.25)
		if err != nil {
			return nil, err
		}
		if base, err = base.Reshape(p.shape...); err != nil {
			return nil, err
		}
		if err := td.Set(p.key, base.MulScalar(scale)); err != nil {
			return nil, err
		}
	}
	return td, nil
}

func run(g *group.Group) error {
	rank, size := g.Rank(), g.Size()
	grads, err := gradients(float64(rank + 1))
	if err != nil {
		return err
	}

	// Every rank calls AllReduce with the same structure. Afterwards each
	// rank's leaves hold the element-wise sum over all ranks, in place.
	start := time.Now()
	if err := grads.AllReduce(tensordict.ReduceSum); err != nil {
		return err
	}
	// Divide by the number of ranks in place: every leaf keeps its storage
	// and its floating dtype, and nothing is allocated.
	if err := grads.DivScalarInPlace(float64(size)); err != nil {
		return err
	}
	mean := grads
	elapsed := time.Since(start)

	// The mean of (r+1) * base over r = 0 .. size-1 is base * (size+1)/2.
	want, err := gradients(float64(size+1) / 2)
	if err != nil {
		return err
	}
	nparams := 0
	for _, it := range mean.Items(tensordict.IncludeNested(), tensordict.LeavesOnly()) {
		w, err := want.Get(it.Key)
		if err != nil {
			return err
		}
		if it.Tensor.DType() != w.DType() {
			return fmt.Errorf("%v: dtype %v, want %v", it.Key, it.Tensor.DType(), w.DType())
		}
		// Compare as floating-point values should be: within a tolerance.
		ok, err := it.Tensor.AllClose(w, 1e-6, 1e-6)
		if err != nil {
			return fmt.Errorf("%v: %w", it.Key, err)
		}
		if !ok {
			return fmt.Errorf("%v: mean gradient sums to %g, want %g", it.Key, it.Tensor.Sum(), w.Sum())
		}
		nparams += it.Tensor.Numel()
	}

	// A rank whose check failed has aborted the job (group.Main), so rank 0
	// passes this barrier only if every rank succeeded.
	if err := g.Barrier(); err != nil {
		return err
	}
	if rank == 0 {
		fmt.Printf("rank 0: averaged %d leaves (%d parameters) over %d ranks in %v\n",
			len(params), nparams, size, elapsed.Round(time.Microsecond))
		fmt.Println("OK")
	}
	return nil
}
