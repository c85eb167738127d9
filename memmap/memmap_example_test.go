package memmap_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// A tensor saved to a file and mapped again, as tensordict's
// MemoryMappedTensor.from_tensor and from_filename do.
func Example() {
	dir, err := os.MkdirTemp("", "memmap-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "obs.memmap")

	src, _ := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	m, err := memmap.FromTensor(src, path)
	if err != nil {
		log.Fatal(err)
	}
	defer memmap.Close(m)

	again, err := memmap.FromFile(path, tensor.Float32, []int{2, 3})
	if err != nil {
		log.Fatal(err)
	}
	defer memmap.Close(again)
	d, _ := tensor.Data[float32](again)
	fi, _ := os.Stat(path)
	fmt.Println(again.Shape(), d, fi.Size(), "bytes")
	// Output: [2 3] [1 2 3 4 5 6] 24 bytes
}

// An anonymous mapping: shared memory with no file name.
func ExampleFromTensor_anonymous() {
	f, err := memmap.FromTensor(tensor.Ones(tensor.Float32, 2, 2), "")
	if err != nil {
		log.Fatal(err)
	}
	_, err = memmap.Filename(f)
	fmt.Println(memmap.Is(f), err != nil)
	memmap.Close(f)
	_, err = f.Bytes()
	fmt.Println(err)
	// Output:
	// true true
	// tensor: Bytes: storage was released (closed memory map?)
}

// File names of entry keys, as tensordict 0.13 and later encode them.
func ExampleEncodeKey() {
	for _, k := range []string{"obs", "a/b", "100% done", "..", ""} {
		fmt.Printf("%q -> %q\n", k, memmap.EncodeKey(k))
	}
	// Output:
	// "obs" -> "obs"
	// "a/b" -> "a%2Fb"
	// "100% done" -> "100%25%20done"
	// ".." -> "%2E%2E"
	// "" -> "%"
}

// The meta.json of a TensorDict node, as tensordict writes it.
func ExampleTensorDictMeta_Marshal() {
	m := &memmap.TensorDictMeta{
		Entries: []memmap.Entry{
			{Key: "obs", Leaf: &memmap.Leaf{Device: "cpu", Shape: []int{2, 3}, DType: tensor.Float32}},
			{Key: "nested", Kind: memmap.KindTensorDict},
		},
		BatchSize: []int{2},
		Device:    "cpu",
	}
	b, _ := m.Marshal()
	fmt.Println(string(b))
	// Output: {"obs": {"device": "cpu", "shape": [2, 3], "dtype": "torch.float32", "is_nested": false}, "nested": {"type": "TensorDict"}, "shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}
}
