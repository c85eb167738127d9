package tensordict_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Save a TensorDict as memory-mapped files in tensordict's layout, and load
// it back (Python's TensorDict.load_memmap reads the same directory).
func ExampleTensorDict_Memmap() {
	dir, err := os.MkdirTemp("", "td-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	prefix := filepath.Join(dir, "td")

	td := tensordict.New(2)
	td.Set(tensordict.K("obs"), tensor.Zeros(tensor.Float32, 2, 3))
	td.Set(tensordict.K("nested", "reward"), tensor.Ones(tensor.Int64, 2, 1))
	td.SetNonTensor(tensordict.K("nested", "label"), "hello")

	saved, err := td.Memmap(prefix)
	if err != nil {
		log.Fatal(err)
	}
	defer saved.Release()
	fmt.Println(saved.IsMemmap(), saved.IsLocked())

	meta, _ := os.ReadFile(filepath.Join(prefix, "nested", "meta.json"))
	fmt.Println(string(meta))

	loaded, err := tensordict.LoadMemmap(prefix)
	if err != nil {
		log.Fatal(err)
	}
	defer loaded.Release()
	label, _ := loaded.GetNonTensor(tensordict.K("nested", "label"))
	reward, _ := loaded.Get(tensordict.K("nested", "reward"))
	fmt.Println(loaded.Keys(tensordict.IncludeNested()), label, reward.Shape())
	// Output:
	// true true
	// {"reward": {"device": "cpu", "shape": [2, 1], "dtype": "torch.int64", "is_nested": false}, "label": {"type": "NonTensorData"}, "shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}
	// [obs nested nested.reward nested.label] hello [2 1]
}

// Load one nested level of a saved TensorDict: here, the golden directory
// Python tensordict keeps in its tests.
func ExampleLoadMemmap_subPath() {
	nested, err := tensordict.LoadMemmap(filepath.Join("..", "testdata", "tensordict", "mmap_example"),
		tensordict.SubPath("nested"), tensordict.CopyOnWrite())
	if err != nil {
		log.Fatal(err)
	}
	defer nested.Release()
	i64, _ := nested.Get(tensordict.K("int64"))
	d, _ := tensor.Data[int64](i64)
	s, _ := nested.GetNonTensor(tensordict.K("string"))
	fmt.Println(nested.BatchSize(), d, s)
	// Output: [2 1] [1 2] [a string!]
}

// Change a loaded TensorDict in place and make the change durable with
// Flush, which syncs every memory-mapped leaf's file.
func ExampleTensorDict_Flush() {
	dir, err := os.MkdirTemp("", "td-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	prefix := filepath.Join(dir, "td")

	td := tensordict.New(2)
	td.Set(tensordict.K("nested", "count"), tensor.Zeros(tensor.Int64, 2))
	saved, err := td.Memmap(prefix)
	if err != nil {
		log.Fatal(err)
	}
	defer saved.Release()

	if err := saved.AddScalarInPlace(7); err != nil {
		log.Fatal(err)
	}
	if err := saved.Flush(); err != nil {
		log.Fatal(err)
	}
	loaded, err := tensordict.LoadMemmap(prefix)
	if err != nil {
		log.Fatal(err)
	}
	defer loaded.Release()
	count, _ := loaded.Get(tensordict.K("nested", "count"))
	fmt.Println(count)
	// Output: int64[2] [7 7]
}
