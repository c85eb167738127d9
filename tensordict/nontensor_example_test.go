package tensordict_test

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Stacking samples whose labels differ gives a NonTensorStack, one label
// per element, as Python's torch.stack; equal values stay one value, and
// indexing gives each sample's label back.
func ExampleNonTensorStack() {
	var samples []*tensordict.TensorDict
	for _, label := range []string{"cat", "dog", "cat"} {
		td := tensordict.New()
		td.Set(tensordict.K("pixels"), tensor.Zeros(tensor.Float32, 4))
		td.SetNonTensor(tensordict.K("label"), label)
		td.SetNonTensor(tensordict.K("source"), "camera 1")
		samples = append(samples, td)
	}
	batch, _ := tensordict.Stack(samples, 0)
	labels, _ := batch.GetNonTensor(tensordict.K("label"))
	s := labels.(*tensordict.NonTensorStack)
	fmt.Println(s.Shape(), s.ToList())
	source, _ := batch.GetNonTensor(tensordict.K("source"))
	fmt.Println(source)
	second, _ := batch.Index(1)
	label, _ := second.GetNonTensor(tensordict.K("label"))
	fmt.Println(label)
	// Output:
	// [3] [cat dog cat]
	// camera 1
	// dog
}

// Read a non-tensor value back with its type. Numbers convert when the
// value fits, so a count that went through JSON as 3.0 still reads as an
// int; a value of another type is an error wrapping ErrKind.
func ExampleGetNonTensorAs() {
	td := tensordict.New()
	td.SetNonTensor(tensordict.K("env"), "CartPole-v1")
	td.SetNonTensor(tensordict.K("count"), 3.0)
	td.SetNonTensor(tensordict.K("tags"), []string{"train", "eval"})

	env, _ := tensordict.GetNonTensorAs[string](td, tensordict.K("env"))
	count, _ := tensordict.GetNonTensorAs[int](td, tensordict.K("count"))
	tags, _ := tensordict.GetNonTensorAs[[]string](td, tensordict.K("tags"))
	fmt.Println(env, count, tags)

	_, err := tensordict.GetNonTensorAs[int](td, tensordict.K("env"))
	fmt.Println(errors.Is(err, tensordict.ErrKind))
	// Output:
	// CartPole-v1 3 [train eval]
	// true
}
