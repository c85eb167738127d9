// Command torchpeer runs in one MPI job with a PyTorch process: Python tensordict's
// init_remote sends a TensorDict to Go, which echoes it back, and Python checks it.
//
// The Python side is learner.py beside this file, world rank 0; this program runs on
// world ranks 1 and up (Open MPI numbers MPMD ranks in command-line order). It needs a
// torch with the "mpi" backend (torch.distributed.is_mpi_available(): torch built with
// MPI, as HPC centres build it; Debian's and PyPI's are not) and tensordict 0.12 or later
// (0.14 was tested; torch 2.4 or later for point-to-point mode). make torchpeer runs it:
//
//	go build -o bin/examples/torchpeer ./examples/torchpeer
//	mpirun --bind-to none -np 1 python3 examples/torchpeer/learner.py : -np 1 bin/examples/torchpeer
//	TORCHPEER_MODE=bcast mpirun --bind-to none -np 1 python3 examples/torchpeer/learner.py : -np 2 bin/examples/torchpeer
//
// (export the variables rather than pass mpirun -x: Open MPI 4.1 applies -x only to its own
// app context.) Point to point (the default), Python calls td.init_remote(dst=1), world
// rank 1 receives with FromRemoteInit(0, WithTorch()), checks it, adds a leaf "reply" and
// a non-tensor "from" and sends it back with InitRemote(0, WithTorch()), which Python's
// TensorDict.from_remote_init(src=1) receives. With TORCHPEER_MODE=bcast both directions
// are broadcasts (use_broadcast=True), which every rank of the world takes part in. The Go
// ranks then meet on their own group (GoGroup), which Python takes no part in.
//
// Run alone (make examples starts it without Python), it finds no PyTorch rank in its job,
// says so and exits 0.
//
// np: 2
// expect: ^(OK|torchpeer: no PyTorch rank in this job.*)$
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// python is the world rank of learner.py, first is the first Go rank.
const (
	python = 0
	first  = 1
)

func main() {
	// Main starts MPI with torch's ranks as peers and runs its function on
	// every Go rank; an error or a panic on any rank is printed and aborts
	// the whole job, the torch ranks too.
	group.Main(func(g *group.Group) error {
		if gg := g.GoGroup(); gg == nil || gg.Size() == g.Size() {
			if g.Rank() == 0 {
				fmt.Println("torchpeer: no PyTorch rank in this job (start it with learner.py first: make torchpeer)")
			}
			return nil
		}
		if err := run(g, os.Getenv("TORCHPEER_MODE") == "bcast"); err != nil {
			return err
		}
		if g.Rank() == first {
			fmt.Println("OK")
		}
		return nil
	}, group.WithTorchPeers())
}

func run(g *group.Group, bcast bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []tensordict.RemoteOption{tensordict.WithTorch(), tensordict.WithContext(ctx)}
	if bcast {
		opts = append(opts, tensordict.WithBroadcast())
	}
	mode := "p2p"
	if bcast {
		mode = "bcast"
	}
	if g.Rank() == first || bcast {
		td, err := tensordict.FromRemoteInit(python, opts...)
		if err != nil {
			return err
		}
		if err := check(td); err != nil {
			return fmt.Errorf("from Python: %w", err)
		}
		fmt.Printf("rank %d: %s: from Python: %d entries, batch %v, locked %v\n", g.Rank(), mode,
			len(td.Keys(tensordict.IncludeNested(), tensordict.LeavesOnly())), td.BatchSize(), td.IsLocked())
		if g.Rank() == first {
			back, err := reply(td)
			if err != nil {
				return err
			}
			if err := back.InitRemote(python, opts...); err != nil {
				return err
			}
		} else {
			back, err := tensordict.FromRemoteInit(first, opts...)
			if err != nil {
				return err
			}
			if err := checkReply(back); err != nil {
				return fmt.Errorf("from rank %d: %w", first, err)
			}
		}
	}
	// Go-to-Go traffic has a group of its own, without the Python rank.
	return g.GoGroup().Barrier()
}

// check looks at what learner.py's make_td sent.
func check(td *tensordict.TensorDict) error {
	obs, err := td.Get(tensordict.K("obs"))
	if err != nil {
		return err
	}
	v, err := tensor.Data[float32](obs)
	if err != nil {
		return err
	}
	want := make([]float32, 12)
	for i := range want {
		want[i] = float32(i)
	}
	note, err := td.GetNonTensor(tensordict.K("note"))
	if err != nil {
		return err
	}
	dtypes, err := td.GetTD(tensordict.K("dtypes"))
	if err != nil {
		return err
	}
	switch {
	case !slices.Equal(v, want) || !slices.Equal(obs.Shape(), []int{3, 4}):
		return fmt.Errorf("obs is %v %v, want %v", obs.Shape(), v, want)
	case note != "from python":
		return fmt.Errorf("note is %v", note)
	case dtypes.Len() != 12:
		return fmt.Errorf("dtypes has %d leaves, want one per dtype", dtypes.Len())
	case !td.IsLocked() || !slices.Equal(td.BatchSize(), []int{3}):
		return fmt.Errorf("batch size %v, locked %v", td.BatchSize(), td.IsLocked())
	}
	return nil
}

// reply is td with a leaf "reply", twice the row sums of obs, and a
// non-tensor "from", locked as td was.
func reply(td *tensordict.TensorDict) (*tensordict.TensorDict, error) {
	back := td.Clone().Unlock()
	obs, err := td.Get(tensordict.K("obs"))
	if err != nil {
		return nil, err
	}
	v, err := tensor.Data[float32](obs)
	if err != nil {
		return nil, err
	}
	sums := make([]float32, 3)
	for i, x := range v {
		sums[i/4] += 2 * x
	}
	r, err := tensor.FromSlice(sums, 3)
	if err != nil {
		return nil, err
	}
	if err := back.Set(tensordict.K("reply"), r); err != nil {
		return nil, err
	}
	if err := back.SetNonTensor(tensordict.K("from"), "go"); err != nil {
		return nil, err
	}
	return back.Lock(), nil
}

func checkReply(td *tensordict.TensorDict) error {
	if err := check(td); err != nil {
		return err
	}
	r, err := td.Get(tensordict.K("reply"))
	if err != nil {
		return err
	}
	v, err := tensor.Data[float32](r)
	if err != nil {
		return err
	}
	if !slices.Equal(v, []float32{12, 44, 76}) {
		return fmt.Errorf("reply is %v", v)
	}
	return nil
}
