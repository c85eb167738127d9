// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the code
// below, which is the README's tour, word for word (main_test.go checks it).
//
// np: 2
// expect: ^\[a c d\] true$
// expect: ^true$

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

func main() {
	group.Main(run) // an error or a panic on any rank ends the whole job, printing it
}

func run(g *group.Group) error {
	if g.Size() != 2 {
		return fmt.Errorf("run me with mpirun -np 2, not %d", g.Size())
	}
	var td *tensordict.TensorDict
	var err error
	if g.Rank() == 0 {
		if td, err = seed(); err != nil {
			return err
		}
		if err := td.InitRemote(1); err != nil { // the structure and the bytes
			return err
		}
		for i := 0; i < 3; i++ { // steady state: new values, one message each
			if err := td.AddScalarInPlace(1); err != nil {
				return err
			}
			if err := td.Send(1, tensordict.WithConsolidated()); err != nil {
				return err
			}
		}
	} else {
		if td, err = tensordict.FromRemoteInit(0); err != nil { // a structure it did not know
			return err
		}
		fmt.Println(td.Keys(), td.EqScalar(1).All()) // [a c d] true
		for i := 0; i < 3; i++ {
			if _, err := td.Recv(0, tensordict.WithConsolidated()); err != nil { // into td: no allocation
				return err
			}
		}
	}
	// A collective: every rank gets the element-wise sum, 4 + 4.
	if err := td.AllReduce(tensordict.ReduceSum); err != nil {
		return err
	}
	if g.Rank() == 1 {
		// Python tensordict's memmap layout: TensorDict.load_memmap(dir) reads it too.
		dir := filepath.Join(os.TempDir(), fmt.Sprint("tour-", os.Getpid()))
		defer os.RemoveAll(dir)
		if _, err := td.Memmap(dir); err != nil {
			return err
		}
		back, err := tensordict.LoadMemmap(dir) // maps the files back
		if err != nil {
			return err
		}
		fmt.Println(back.EqScalar(8).All()) // true
		fmt.Println(back)                   // the tree: keys, dtypes, shapes, values
	}
	return nil
}

// seed builds the TensorDict of tensordict's init_remote documentation.
func seed() (*tensordict.TensorDict, error) {
	f, err := memmap.FromTensor(tensor.Ones(tensor.Float32, 2, 2), "") // a memory-mapped leaf
	if err != nil {
		return nil, err
	}
	td := tensordict.New(2) // batch size [2]
	err = errors.Join(
		td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2)), // nested levels made as needed
		td.Set(tensordict.K("c"), tensor.Ones(tensor.Float32, 2)),
		td.Set(tensordict.K("d", "e", "f"), f),
	)
	if err != nil {
		return nil, err
	}
	if td, err = td.Expand(1, 2); err != nil { // stride-0 views, batch size [1 2]
		return nil, err
	}
	return td.Contiguous().Consolidate() // one storage: what goes on the wire
}
