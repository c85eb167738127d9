// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 2
// expect: ^rank 0: received a Batch of size \[4\] from rank 1, label "episode-7"$
// expect: ^OK$

// Command tensorclass sends a Go struct between ranks as a tensorclass, the
// Go counterpart of Python tensordict's @tensorclass: the struct travels as a
// TensorDict and the receiver gets it back as the same Go type.
//
// Run it with two ranks:
//
//	go build -o bin/examples/tensorclass ./examples/tensorclass
//	mpirun -np 2 --bind-to none bin/examples/tensorclass
//
// Rank 1, a worker, fills a Batch of experience (tensors, a nested struct, a
// string label) and sends it with InitRemote. Rank 0, the learner, receives it
// with FromRemoteInitAs[Batch], which rebuilds a Batch value from the class name
// the TensorDict carries, and checks every field. The program exits with status
// 1 if a check or a call fails.
package main

import (
	"fmt"
	"slices"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Batch is a tensorclass: a struct whose fields map to TensorDict entries.
// The td tags name the entries; the []int field tagged ",batch" holds the
// batch size, the leading dimensions every tensor shares.
type Batch struct {
	Size   []int          `td:",batch"`
	Obs    *tensor.Tensor `td:"obs"`    // a tensor leaf
	Reward *tensor.Tensor `td:"reward"` // another one
	Info   Info           `td:"info"`   // a nested struct: a nested TensorDict
	Label  string         `td:"label"`  // a non-tensor value (NonTensorData)
}

// Info is nested inside Batch; it takes Batch's batch size.
type Info struct {
	Step *tensor.Tensor `td:"step"`
	Done *tensor.Tensor `td:"done"`
}

// Registering the type gives it a name that travels with its TensorDicts, so a
// receiver can tell which Go type to rebuild. Both ranks run this program, so
// both register it.
func init() { tensordict.RegisterClass[Batch]("examples.tensorclass.Batch") }

func main() {
	// Main starts MPI and runs run on every rank with the world group; an
	// error or a panic on any rank is printed and ends the whole job.
	group.Main(run)
}

func run(g *group.Group) error {
	if g.Size() != 2 {
		return fmt.Errorf("needs exactly 2 ranks, got %d; run: mpirun -np 2 tensorclass", g.Size())
	}
	if g.Rank() == 1 {
		return work()
	}
	return learn()
}

// work is rank 1: it fills a Batch and sends it to rank 0.
func work() error {
	step, err := tensor.FromSlice([]int64{40, 41, 42, 43}, 4)
	if err != nil {
		return err
	}
	done, err := tensor.FromSlice([]bool{false, false, false, true}, 4)
	if err != nil {
		return err
	}
	b := Batch{
		Size:   []int{4},
		Obs:    tensor.Full(tensor.Float32, 0.5, 4, 3),
		Reward: tensor.Ones(tensor.Float64, 4, 1),
		Info:   Info{Step: step, Done: done},
		Label:  "episode-7",
	}
	// FromStruct views the struct as a TensorDict (tensors are shared, not
	// copied); its ClassName is the registered name.
	td, err := tensordict.FromStruct(&b)
	if err != nil {
		return err
	}
	return td.InitRemote(0)
}

// learn is rank 0: it receives the Batch as a Go value and checks it.
func learn() error {
	// FromRemoteInitAs is FromRemoteInit followed by As: it fills a Batch from
	// the received TensorDict, and fails if the sender's class is another type.
	b, err := tensordict.FromRemoteInitAs[Batch](1)
	if err != nil {
		return err
	}
	fmt.Printf("rank 0: received a Batch of size %v from rank 1, label %q\n", b.Size, b.Label)

	if !slices.Equal(b.Size, []int{4}) || b.Label != "episode-7" {
		return fmt.Errorf("size %v, label %q; want [4], \"episode-7\"", b.Size, b.Label)
	}
	if !slices.Equal(b.Obs.Shape(), []int{4, 3}) || !b.Obs.EqScalar(0.5).All() {
		return fmt.Errorf("obs = %v, want 4x3 of 0.5", b.Obs)
	}
	if b.Reward.DType() != tensor.Float64 || !b.Reward.EqScalar(1).All() {
		return fmt.Errorf("reward = %v, want float64 ones", b.Reward)
	}
	// tensor.Data gives a typed slice over a contiguous tensor, without copying.
	steps, err := tensor.Data[int64](b.Info.Step)
	if err != nil {
		return err
	}
	done, err := tensor.Data[bool](b.Info.Done)
	if err != nil {
		return err
	}
	if !slices.Equal(steps, []int64{40, 41, 42, 43}) || !slices.Equal(done, []bool{false, false, false, true}) {
		return fmt.Errorf("info.step = %v, info.done = %v", steps, done)
	}
	fmt.Printf("rank 0: obs %v %v, reward %v %v, info.step %v, info.done %v\n",
		b.Obs.DType(), b.Obs.Shape(), b.Reward.DType(), b.Reward.Shape(), steps, done)
	fmt.Println("OK")
	return nil
}
