// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 4
// expect: ^rank 0 of 4: broadcast [0-9]+ bytes, leaves \[obs action next\.reward next\.done\]$
// expect: ^OK$

// Command broadcast sends one TensorDict from rank 0 to every other rank with
// InitRemote in broadcast mode, like Python tensordict's
// init_remote(use_broadcast=True).
//
// Run it with any number of ranks, two or more:
//
//	go build -o bin/examples/broadcast ./examples/broadcast
//	mpirun -np 4 --oversubscribe --bind-to none bin/examples/broadcast
//
// Rank 0 builds a batch of four observations with a nested entry and a
// non-tensor label and calls InitRemote with WithBroadcast. Every other rank
// calls FromRemoteInit with WithBroadcast: it learns the structure from the
// message, so it needs no template. Each receiver rebuilds the same batch locally
// with makeBatch and compares, leaf by leaf, with Eq. The program exits with
// status 1 if a check or a call fails.
package main

import (
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

func main() {
	// Main starts MPI and runs run on every rank with the world group; an
	// error or a panic on any rank is printed and ends the whole job.
	group.Main(run)
}

// makeBatch builds the batch rank 0 sends: batch size [4], with leaves of
// several dtypes and shapes whose values are easy to predict.
func makeBatch() (*tensordict.TensorDict, error) {
	// Four 3x64x64 images holding 0, 1, 2, ... (exact in float32): 192 KiB.
	obs, err := tensor.Arange(tensor.Float32, 0, 4*3*64*64, 1)
	if err != nil {
		return nil, err
	}
	if obs, err = obs.Reshape(4, 3, 64, 64); err != nil {
		return nil, err
	}
	action, err := tensor.FromSlice([]int64{3, 1, 4, 1}, 4)
	if err != nil {
		return nil, err
	}
	td := tensordict.New(4)
	for _, e := range []struct {
		k tensordict.Key
		v *tensor.Tensor
	}{
		{tensordict.K("obs"), obs},
		{tensordict.K("action"), action},
		{tensordict.K("next", "reward"), tensor.Full(tensor.Float64, 0.5, 4, 1)},
		{tensordict.K("next", "done"), tensor.Zeros(tensor.Bool, 4, 1)},
	} {
		if err := td.Set(e.k, e.v); err != nil {
			return nil, err
		}
	}
	// Non-tensor values (Python's NonTensorData) travel too.
	if err := td.SetNonTensor(tensordict.K("env"), "CartPole-v1"); err != nil {
		return nil, err
	}
	return td, nil
}

func run(g *group.Group) error {
	if g.Size() < 2 {
		return fmt.Errorf("needs at least 2 ranks; run: mpirun -np 4 --oversubscribe broadcast")
	}
	if g.Rank() == 0 {
		td, err := makeBatch()
		if err != nil {
			return err
		}
		// In broadcast mode the destination is ignored: every rank of the
		// group receives.
		if err := td.InitRemote(0, tensordict.WithBroadcast()); err != nil {
			return err
		}
		_, size, err := tensordict.Layout(td) // the consolidated storage's size
		if err != nil {
			return err
		}
		fmt.Printf("rank 0 of %d: broadcast %d bytes, leaves %v\n",
			g.Size(), size, td.Keys(tensordict.IncludeNested(), tensordict.LeavesOnly()))
	} else if err := receive(); err != nil {
		return err
	}
	// A rank whose check failed has aborted the job (group.Main), so rank 0
	// passes this barrier only if every rank succeeded.
	if err := g.Barrier(); err != nil {
		return err
	}
	if g.Rank() == 0 {
		fmt.Println("OK")
	}
	return nil
}

// receive takes rank 0's broadcast and checks it against a local copy.
func receive() error {
	got, err := tensordict.FromRemoteInit(0, tensordict.WithBroadcast())
	if err != nil {
		return err
	}
	want, err := makeBatch()
	if err != nil {
		return err
	}
	// Eq compares leaf by leaf (and the non-tensor values); All is true when
	// every element of every leaf is equal.
	eq, err := got.Eq(want)
	if err != nil {
		return fmt.Errorf("comparing with the expected batch: %w", err)
	}
	if !eq.All() {
		return fmt.Errorf("received batch differs from the expected one:\n%v", got)
	}
	env, err := got.GetNonTensor(tensordict.K("env"))
	if err != nil {
		return err
	}
	if env != "CartPole-v1" {
		return fmt.Errorf("env = %v, want CartPole-v1", env)
	}
	// The result is consolidated: all its leaves view one byte storage, so a
	// later Recv with WithConsolidated refills it with one message.
	if !got.IsConsolidated() {
		return fmt.Errorf("received batch is not consolidated")
	}
	return nil
}
