package tensordict_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Cutting a batch into shards (views) and joining them again.
func ExampleCat() {
	x, _ := tensor.Arange(tensor.Float32, 0, 10, 1)
	td := tensordict.New(10)
	td.Set(tensordict.K("x"), x)
	shards, _ := td.Chunk(4, 0) // ceil(10/4) = 3 rows each, the last 1
	var sizes [][]int
	for _, s := range shards {
		sizes = append(sizes, s.BatchSize())
	}
	fmt.Println(sizes)
	// A write into a shard reaches the batch: shards are views.
	last := shards[len(shards)-1]
	last.MulScalarInPlace(10)
	joined, _ := tensordict.Cat(shards, 0)
	j, _ := joined.Get(tensordict.K("x"))
	fmt.Println(joined.BatchSize(), j.At(9), x.At(9))
	// Output:
	// [[3] [3] [3] [1]]
	// [10] 90 90
}

// Writing a received minibatch into rows of a preallocated buffer, as
// Python's buf[idx] = mb.
func ExampleTensorDict_SetAt() {
	buf := tensordict.New(5)
	buf.Set(tensordict.K("obs"), tensor.Zeros(tensor.Float32, 5, 2))
	mb := tensordict.New(2)
	mb.Set(tensordict.K("obs"), tensor.Ones(tensor.Float32, 2, 2))
	if err := buf.SetAt(tensordict.IndexList(4, 1), mb); err != nil {
		fmt.Println(err)
		return
	}
	o, _ := buf.Get(tensordict.K("obs"))
	perRow, _ := o.SumDims([]int{1}, false)
	for i := range 5 {
		fmt.Print(perRow.At(i), " ")
	}
	fmt.Println()
	// Output:
	// 0 2 0 0 2
}

// Averaging gradients in place after a sum over ranks, as
// examples/allreduce does after AllReduce.
func ExampleTensorDict_DivScalarInPlace() {
	grads := tensordict.New()
	grads.Set(tensordict.K("w"), tensor.Full(tensor.Float32, 6, 3))
	if err := grads.DivScalarInPlace(3); err != nil {
		fmt.Println(err)
		return
	}
	m, _ := grads.Mean()
	w, _ := m.Get(tensordict.K("w"))
	fmt.Println(w.At())
	// Output: 2
}
