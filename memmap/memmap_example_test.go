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
