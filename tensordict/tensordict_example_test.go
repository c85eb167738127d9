package tensordict_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// The seed example of Python tensordict: nested keys, a batch size, expand
// and contiguous.
func Example() {
	td := tensordict.New(2)
	td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2))
	td.Set(tensordict.K("c"), tensor.Ones(tensor.Float32, 2))
	td.Set(tensordict.K("d", "e", "f"), tensor.Ones(tensor.Float32, 2, 2))
	ex, err := td.Expand(1, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	td = ex.Contiguous()
	fmt.Println(td.Keys())
	fmt.Println(td.Keys(tensordict.IncludeNested(), tensordict.LeavesOnly()))
	fmt.Println(td.BatchSize(), td.EqScalar(1).All())
	// Output:
	// [a c d]
	// [a.b c d.e.f]
	// [1 2] true
}

func ExampleTensorDict_Set() {
	td := tensordict.New(3)
	err := td.Set(tensordict.K("obs", "pixels"), tensor.Zeros(tensor.Uint8, 3, 4, 4))
	fmt.Println(err)
	err = td.Set(tensordict.K("reward"), tensor.Zeros(tensor.Float32, 2))
	fmt.Println(err)
	// Output:
	// <nil>
	// tensordict: Set: key reward: tensor shape [2] does not start with batch size [3]
}

func ExampleTensorDict_Lock() {
	td := tensordict.New(2)
	td.Set(tensordict.K("x"), tensor.Zeros(tensor.Float32, 2))
	td.Lock()
	fmt.Println(td.Set(tensordict.K("y"), tensor.Zeros(tensor.Float32, 2)))
	fmt.Println(td.SetInPlace(tensordict.K("x"), tensor.Ones(tensor.Float32, 2)))
	x, _ := td.Get(tensordict.K("x"))
	fmt.Println(x)
	// Output:
	// tensordict: Set: key y: cannot add a new entry: tensordict is locked
	// <nil>
	// float32[2] [1 1]
}

func ExampleTensorDict_String() {
	td := tensordict.New(2)
	td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2))
	td.Set(tensordict.K("c"), tensor.Zeros(tensor.Int64, 2, 3))
	td.SetNonTensor(tensordict.K("label"), "hello")
	fmt.Println(td)
	// Output:
	// TensorDict, batch size [2], 2 tensor leaves, 56 B
	// KEY    TYPE        SHAPE  BYTES  VALUES
	// a      TensorDict  [2]
	// └── b  float32     [2]    8 B    [1 1]
	// c      int64       [2 3]  48 B   [0 0 0 0 0 0]
	// label  non-tensor                "hello"
}

// PythonRepr prints Python tensordict's repr, to compare with Python's
// output.
func ExampleTensorDict_PythonRepr() {
	td := tensordict.New(2)
	td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2))
	td.SetNonTensor(tensordict.K("label"), "hello")
	fmt.Println(td.PythonRepr())
	// Output:
	// TensorDict(
	//     fields={
	//         a: TensorDict(
	//             fields={
	//                 b: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False)},
	//             batch_size=torch.Size([2]),
	//             device=None,
	//             is_shared=False),
	//         label: NonTensorData(data=hello, batch_size=torch.Size([2]), device=None)},
	//     batch_size=torch.Size([2]),
	//     device=None,
	//     is_shared=False)
}

// WriteTree prints the tree with a title of the caller's and as many
// elements of each tensor as asked; tdmpi inspect prints this.
func ExampleTensorDict_WriteTree() {
	td := tensordict.New(3)
	x, _ := tensor.Arange(tensor.Float32, 0, 3, 0.5)
	x, _ = x.Reshape(3, 2)
	td.Set(tensordict.K("obs", "x"), x)
	td.Set(tensordict.K("done"), tensor.Zeros(tensor.Bool, 3))
	td.WriteTree(os.Stdout, tensordict.TreeOptions{Title: "batch 7", Values: 4})
	// Output:
	// batch 7, batch size [3], 2 tensor leaves, 27 B
	// KEY    TYPE        SHAPE  BYTES  VALUES
	// obs    TensorDict  [3]
	// └── x  float32     [3 2]  24 B   [0 0.5 1 1.5 ...]
	// done   bool        [3]    3 B    [false false false]
}

// Consolidation packs every leaf into one storage, 8-byte aligned, and
// describes it with Python tensordict's metadata tree.
func ExampleTensorDict_Consolidate() {
	td := tensordict.New(3)
	td.Set(tensordict.K("x"), tensor.Ones(tensor.Float32, 3))
	td.Set(tensordict.K("y"), tensor.Ones(tensor.Int64, 3))
	td.Set(tensordict.K("m"), tensor.Ones(tensor.Bool, 3))
	c, err := td.Consolidate()
	if err != nil {
		fmt.Println(err)
		return
	}
	meta, _ := c.ConsolidatedMetadata()
	fmt.Println(c.ConsolidatedStorage().Len(), c.IsConsolidated())
	fmt.Println(string(meta))

	back, _ := tensordict.FromConsolidated(c.ConsolidatedStorage(), meta)
	fmt.Println(back.Keys(), back.EqScalar(1).All())
	// Output:
	// 48 true
	// {"cls":"TensorDict","non_tensors":{},"leaves":{"x":["torch.float32",[3],0,16,4],"y":["torch.int64",[3],16,40,0],"m":["torch.bool",[3],40,48,5]},"cls_metadata":{"device":null,"names":[null],"batch_size":[3],"is_locked":false}}
	// [x y m] true
}

func ExampleLoadConsolidated() {
	dir, _ := os.MkdirTemp("", "tdexample")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "data.td")

	td := tensordict.New(2)
	td.Set(tensordict.K("obs", "x"), tensor.Full(tensor.Float64, 0.5, 2, 3))
	if err := td.SaveConsolidated(path); err != nil {
		fmt.Println(err)
		return
	}
	got, err := tensordict.LoadConsolidated(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer got.Release() // unmaps the file
	x, _ := got.Get(tensordict.K("obs", "x"))
	fmt.Println(x.Shape(), got.EqScalar(0.5).All(), got.IsConsolidated())
	// Output:
	// [2 3] true true
}

func ExampleStack() {
	a := tensordict.New()
	a.Set(tensordict.K("x"), tensor.Full(tensor.Int32, 1, 2))
	b := tensordict.New()
	b.Set(tensordict.K("x"), tensor.Full(tensor.Int32, 2, 2))
	s, _ := tensordict.Stack([]*tensordict.TensorDict{a, b}, 0)
	x, _ := s.Get(tensordict.K("x"))
	fmt.Println(s.BatchSize(), x)
	parts, _ := s.Unbind(0)
	fmt.Println(len(parts), parts[1].EqScalar(2).All())
	// Output:
	// [2] int32[2 2] [[1 1] [2 2]]
	// 2 true
}

func ExampleTensorDict_Mask() {
	td := tensordict.New(4)
	v, _ := tensor.FromSlice([]float32{10, 20, 30, 40})
	td.Set(tensordict.K("v"), v)
	mask := v.GtScalar(15)
	sel, _ := td.Mask(mask)
	got, _ := sel.Get(tensordict.K("v"))
	fmt.Println(sel.BatchSize(), got)
	// Output:
	// [3] float32[3] [20 30 40]
}

type Step struct {
	Batch  []int          `td:",batch"`
	Obs    *tensor.Tensor `td:"obs"`
	Reward *tensor.Tensor `td:"reward"`
	Label  string         `td:"label"`
}

func ExampleFromStruct() {
	tensordict.RegisterClass[Step]("example.Step")
	s := Step{Batch: []int{2}, Obs: tensor.Zeros(tensor.Float32, 2, 3), Reward: tensor.Ones(tensor.Float32, 2), Label: "run"}
	td, _ := tensordict.FromStruct(s)
	fmt.Println(td.ClassName(), td.Keys())

	back, err := tensordict.As[Step](td)
	fmt.Println(back.Label, back.Batch, back.Obs.Shape(), err)
	// Output:
	// example.Step [obs reward label]
	// run [2] [2 3] <nil>
}

func ExampleDiffStructure() {
	a := tensordict.New(2)
	a.Set(tensordict.K("n", "x"), tensor.Zeros(tensor.Float32, 2))
	b := tensordict.New(2)
	b.Set(tensordict.K("n", "x"), tensor.Zeros(tensor.Float64, 2))
	fmt.Println(a.Signature() == b.Signature())
	fmt.Println(tensordict.DiffStructure(a, b))
	// Output:
	// false
	// tensordict: DiffStructure: key n.x: float32[2] vs float64[2]
}
