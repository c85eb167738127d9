//go:build cgo && !nompi

package tensordict_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Every rank calls Broadcast; rank 0's TensorDict reaches all of them. Run
// under mpirun -np N, each rank prints the same lines.
func ExampleTensorDict_Broadcast() {
	var td *tensordict.TensorDict
	if group.World().Rank() == 0 {
		td = tensordict.New(2)
		_ = td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2))
		_ = td.SetNonTensor(tensordict.K("label"), "hello")
	}
	got, err := td.Broadcast(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	label, _ := got.GetNonTensor(tensordict.K("label"))
	x, _ := got.Get(tensordict.K("a", "b"))
	fmt.Println(got.Keys(tensordict.IncludeNested(), tensordict.LeavesOnly()), label, x.EqScalar(1).All())
	// Output:
	// [a.b] hello true
}

// AllReduce works in place on every rank. Here each rank holds its rank
// number plus one; the maximum over the ranks is the group's size.
func ExampleTensorDict_AllReduce() {
	g := group.World()
	td := tensordict.New(3)
	_ = td.Set(tensordict.K("x"), tensor.Full(tensor.Int64, float64(g.Rank()+1), 3))
	_ = td.Set(tensordict.K("nested", "y"), tensor.Full(tensor.Float32, float64(g.Rank()+1), 3, 2))
	if err := td.AllReduce(tensordict.ReduceMax); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(td.EqScalar(float64(g.Size())).All())
	// Output:
	// true
}

// AllGather returns every rank's TensorDict, in rank order; they may
// differ in size.
func ExampleTensorDict_AllGather() {
	g := group.World()
	td := tensordict.New(g.Rank() + 1)
	_ = td.Set(tensordict.K("x"), tensor.Full(tensor.Float64, float64(g.Rank()), g.Rank()+1))
	all, err := td.AllGather()
	if err != nil {
		fmt.Println(err)
		return
	}
	ok := len(all) == g.Size()
	for r, got := range all {
		ok = ok && got.BatchSize()[0] == r+1 && got.EqScalar(float64(r)).All()
	}
	fmt.Println(ok)
	// Output:
	// true
}
