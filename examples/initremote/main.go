// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 2
// expect: ^rank 1: keys \[a c d\], all ones: true$
// expect: ^TensorDict, batch size \[1 2\], 3 tensor leaves, 32 B$
// expect: ^    └── f  float32     \[1 2 2\]  16 B   \[1 1 1 1\]$
// expect: ^OK$

// Command initremote is the seed scenario of Python tensordict's init_remote
// documentation, in Go: rank 0 builds a TensorDict and sends it to rank 1, which
// knows nothing of its structure beforehand and rebuilds it with FromRemoteInit.
//
// Run it with two ranks:
//
//	go build -o bin/examples/initremote ./examples/initremote
//	mpirun -np 2 --bind-to none bin/examples/initremote
//
// Rank 0 builds a TensorDict of batch size [2] with three leaves: ("a", "b") and
// ("c"), float32 ones in memory, and ("d", "e", "f"), float32 ones in a
// memory-mapped file. It expands the batch to [1, 2], makes the leaves contiguous
// and calls InitRemote(1). Rank 1 calls FromRemoteInit(0), checks the keys and
// values it received, and prints the TensorDict (fmt.Println of a TensorDict
// prints its tree: keys, dtypes, shapes, batch sizes and first values). The
// program exits with status 1 if a check or a call fails.
package main

import (
	"fmt"
	"slices"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

func main() {
	// Main starts MPI and runs run on every rank with the world group; an
	// error or a panic on any rank is printed and ends the whole job.
	group.Main(run)
}

// run is the program proper: rank 0 sends, rank 1 receives and checks.
func run(g *group.Group) error {
	if g.Size() != 2 {
		return fmt.Errorf("needs exactly 2 ranks, got %d; run: mpirun -np 2 initremote", g.Size())
	}
	if g.Rank() == 0 {
		if err := send(); err != nil {
			return err
		}
	} else if err := receive(); err != nil {
		return err
	}
	// A rank whose check failed has aborted the job (group.Main): the
	// ranks pass this barrier only if both succeeded. Rank 1, which printed
	// the TensorDict, has the last word.
	if err := g.Barrier(); err != nil {
		return err
	}
	if g.Rank() == 1 {
		fmt.Println("OK")
	}
	return nil
}

// send builds the TensorDict of tensordict's documentation and sends it to rank 1.
func send() error {
	td := tensordict.New(2) // batch size [2]
	if err := td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2)); err != nil {
		return err
	}
	if err := td.Set(tensordict.K("c"), tensor.Ones(tensor.Float32, 2)); err != nil {
		return err
	}
	// An empty filename maps the tensor anonymously (shared memory, no file name).
	f, err := memmap.FromTensor(tensor.Ones(tensor.Float32, 2, 2), "")
	if err != nil {
		return err
	}
	defer memmap.Close(f)
	if err := td.Set(tensordict.K("d", "e", "f"), f); err != nil {
		return err
	}

	// Expand makes stride-0 views of batch size [1, 2]; Contiguous copies them
	// into real memory, which is what goes on the wire.
	td, err = td.Expand(1, 2)
	if err != nil {
		return err
	}
	td = td.Contiguous()
	if err := td.InitRemote(1); err != nil {
		return err
	}
	fmt.Printf("rank 0: sent a TensorDict of batch size %v with leaves %v to rank 1\n",
		td.BatchSize(), td.Keys(tensordict.IncludeNested(), tensordict.LeavesOnly()))
	return nil
}

// receive rebuilds the TensorDict rank 0 sends, checks it and prints it.
func receive() error {
	got, err := tensordict.FromRemoteInit(0)
	if err != nil {
		return err
	}
	// Keys lists the top-level entries in insertion order.
	keys := got.Keys()
	want := []tensordict.Key{tensordict.K("a"), tensordict.K("c"), tensordict.K("d")}
	if !slices.EqualFunc(keys, want, tensordict.Key.Equal) {
		return fmt.Errorf("keys %v, want %v", keys, want)
	}
	if bs := got.BatchSize(); !slices.Equal(bs, []int{1, 2}) {
		return fmt.Errorf("batch size %v, want [1 2]", bs)
	}
	// EqScalar compares every leaf with 1; All reduces the result to one bool.
	ones := got.EqScalar(1).All()
	fmt.Printf("rank 1: keys %v, all ones: %v\n", keys, ones)
	if !ones {
		return fmt.Errorf("received values are not all ones:\n%v", got)
	}
	fmt.Println(got)
	return nil
}
